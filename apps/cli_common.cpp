#include "apps/cli_common.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace sdp::app {

std::string version_text(const std::string& app_name) {
  std::string backends;
#if defined(SDP_CUDA_EMULATION)
  backends = "CUDA backend on the emulated device";
#elif defined(SDP_HAVE_CUDA)
  backends = "CUDA backend";
#else
  backends = "no CUDA backend";
#endif
#if defined(SDP_HAVE_MPI)
  backends += ", MPI";
#endif
#if defined(SDP_HAVE_NCCL)
  backends += ", NCCL";
#endif
  return app_name + " " + SDP_VERSION + " (CPU backend, " + backends + ")";
}

void add_version_flag(CLI::App& app, const std::string& app_name) {
  app.set_version_flag("--version", version_text(app_name), "Print the version and the backends "
                       "of this build, then exit");
}

namespace {
void collect_flags(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& name : opt->get_lnames()) out.push_back("--" + name);
  // Option groups are nameless subcommands in CLI11.
  for (const CLI::App* group : app.get_subcommands([](const CLI::App*) { return true; }))
    collect_flags(*group, out);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> known_flags(const CLI::App& app) {
  std::vector<std::string> out;
  collect_flags(app, out);
  return out;
}

std::string nearest_flag(const std::string& typed, const std::vector<std::string>& known) {
  // "--steps=3" is compared without its value.
  const std::string name = typed.substr(0, typed.find('='));
  const size_t allowed = std::max<size_t>(1, name.size() / 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& flag : known) {
    const size_t d = edit_distance(name, flag);
    if (d < best_distance) {
      best = flag;
      best_distance = d;
    }
  }
  return best_distance <= allowed && best != name ? best : std::string();
}

int report_parse_error(const CLI::App& app, const std::string& app_name,
                       const CLI::ParseError& error) {
  const int status = app.exit(error);
  if (status == 0) return 0;
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    // CLI11 lists the unexpected arguments after the colon.
    const std::string what = error.what();
    std::istringstream words(what.substr(what.find(':') + 1));
    const std::vector<std::string> known = known_flags(app);
    for (std::string word; words >> word;) {
      if (word.rfind("-", 0) != 0) continue;
      const std::string near = nearest_flag(word, known);
      if (!near.empty())
        std::fprintf(stderr, "%s: unknown flag %s: did you mean %s?\n", app_name.c_str(),
                     word.c_str(), near.c_str());
    }
  }
  return status;
}

}  // namespace sdp::app
