#include "engine/train/export_destination.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <regex>
#include <set>
#include <system_error>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/save_dir_lock.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/sharded_checkpoint.h"

namespace sdp {

namespace fs = std::filesystem;

namespace {

// Directory entries looked at when searching an output for save
// directories: an output holding more is refused without --force anyway.
constexpr int kMaxEntriesSearched = 100000;

[[noreturn]] void refuse(const fs::path& out, const std::string& why) {
  throw PermanentError(format("output '", out.string(), "' ", why));
}

bool inside_or_same(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return true;
}

bool is_step_checkpoint(const fs::directory_entry& entry) {
  static const std::regex step_name("step-[0-9]+");
  std::error_code ec;
  if (!std::regex_match(entry.path().filename().string(), step_name) ||
      !entry.is_directory(ec))
    return false;
  return fs::exists(state_file_of(entry.path()), ec) ||
         fs::exists(entry.path() / kShardIndexFileName, ec);
}

// What makes `dir` a save directory of sdp-train ("" when nothing does).
std::string save_directory_sign(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / checkpoint::SaveDirLock::kFileName, ec))
    return format("its lock file ", checkpoint::SaveDirLock::kFileName);
  if (fs::is_regular_file(dir / "latest", ec)) return "a 'latest' file";
  for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    if (is_step_checkpoint(*it)) return format("checkpoint ", it->path().filename().string());
  return "";
}

// The first save directory at or below `root` (not following symlinks), or
// nothing; gives up quietly after kMaxEntriesSearched entries.
std::optional<fs::path> save_directory_below(const fs::path& root) {
  std::error_code ec;
  int seen = 0;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator() && ++seen < kMaxEntriesSearched;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "latest" || name == checkpoint::SaveDirLock::kFileName || is_step_checkpoint(*it))
      return it->path().parent_path();
  }
  return std::nullopt;
}

std::vector<std::string> entry_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) throw PermanentError(format("cannot list '", dir.string(), "': ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

// An earlier export (or an hf-form checkpoint): regular files of the
// export's names only, with a state file among them.
bool holds_only_an_export(const fs::path& dir, const std::vector<std::string>& names) {
  bool has_state = false;
  for (const std::string& name : names) {
    std::error_code ec;
    if (!is_export_file_name(name) ||
        !fs::is_regular_file(fs::symlink_status(dir / name, ec)))
      return false;
    has_state = has_state || name == kStateFileName;
  }
  return has_state;
}

std::string some_names(const std::vector<std::string>& names) {
  std::string text;
  const size_t shown = std::min<size_t>(names.size(), 3);
  for (size_t i = 0; i < shown; ++i) text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown) text += format(" and ", names.size() - shown, " more");
  return text;
}

}  // namespace

bool is_export_file_name(const std::string& name) {
  static const std::regex tensors("(model|optimizer)(-[0-9]{5,}-of-[0-9]{5,})?\\.safetensors"
                                  "|(model|optimizer)\\.safetensors\\.index\\.json");
  return name == "config.json" || name == "generation_config.json" ||
         name == "tokenizer.json" || name == "tokenizer_config.json" ||
         name == kStateFileName || std::regex_match(name, tensors);
}

ExportDestination check_export_destination(const fs::path& checkpoint, const fs::path& source,
                                           const fs::path& out_given, bool force) {
  std::error_code ec;
  const fs::path input = fs::canonical(checkpoint, ec);
  if (ec) fail("cannot resolve checkpoint '", checkpoint.string(), "': ", ec.message());
  const fs::path given = fs::canonical(source, ec);
  if (ec) fail("cannot resolve '", source.string(), "': ", ec.message());
  const fs::path out = fs::weakly_canonical(out_given, ec);
  if (ec) refuse(out_given, format("cannot be resolved: ", ec.message()));
  const bool exists = fs::exists(out, ec);
  if (exists && !fs::is_directory(out, ec)) refuse(out_given, "exists and is not a directory");

  // Named as resolved too where symlinks lead elsewhere than the path says.
  const std::string resolved = fs::absolute(out_given, ec).lexically_normal() == out
                                   ? ""
                                   : format("(", out.string(), ") ");
  if (inside_or_same(out, input))
    refuse(out_given, format(resolved, out == input ? "is" : "lies inside", " the checkpoint it "
                             "exports, '", checkpoint.string(), "': choose a directory outside "
                             "it"));
  if (inside_or_same(input, out) || inside_or_same(given, out))
    refuse(out_given, format(resolved, "contains the checkpoint it exports, '",
                             checkpoint.string(), "', which the export would replace: choose a "
                             "directory outside it"));
  // The output and every directory above it: none may be a save directory.
  for (fs::path dir = out;; dir = dir.parent_path()) {
    if (fs::is_directory(dir, ec)) {
      const std::string sign = save_directory_sign(dir);
      if (!sign.empty())
        refuse(out_given, format(resolved, dir == out ? "is" : "lies inside", " the save "
                                 "directory '", dir.string(), "' (it has ", sign, "), whose "
                                 "checkpoints the export would replace: choose a directory "
                                 "outside every save directory"));
    }
    if (dir == dir.parent_path()) break;
  }
  if (!exists) return {out, ExportPlacement::whole_directory};
  const std::vector<std::string> names = entry_names(out);
  if (names.empty()) return {out, ExportPlacement::whole_directory};
  if (const auto below = save_directory_below(out))
    refuse(out_given, format(resolved, "contains the save directory '", below->string(),
                             "', whose checkpoints the export would replace: choose a "
                             "directory outside every save directory"));
  if (holds_only_an_export(out, names)) return {out, ExportPlacement::whole_directory};
  if (!force)
    refuse(out_given, format(resolved, "is not empty and is not a checkpoint that sdp-export "
                             "wrote (it holds ", some_names(names), "): choose a new or empty "
                             "directory, or pass --force to write the export's files into it "
                             "beside the files it holds (files of the export's names are "
                             "replaced; nothing else is deleted)"));
  return {out, ExportPlacement::beside_files};
}

int write_export(const ExportDestination& destination,
                 const std::function<void(const fs::path&)>& write_into) {
  if (destination.placement == ExportPlacement::whole_directory) {
    write_into(destination.dir);
    return 0;
  }
  // Built whole beside the destination first, then moved in file by file:
  // nothing of the destination changes until the whole export exists.
  const fs::path built = checkpoint::detail::unique_sibling(destination.dir, "tmp");
  struct RemoveBuilt {
    const fs::path& dir;
    ~RemoveBuilt() {
      std::error_code ec;
      fs::remove_all(dir, ec);  // only what this export wrote
    }
  } remove_built{built};
  write_into(built);
  std::set<std::string> exported;
  for (const std::string& name : entry_names(built)) exported.insert(name);
  std::vector<std::string> stale;
  int others = 0;
  for (const std::string& name : entry_names(destination.dir)) {
    if (exported.count(name)) continue;
    if (is_export_file_name(name)) stale.push_back(name);
    else ++others;
  }
  if (!stale.empty())
    throw PermanentError(format(
        "output '", destination.dir.string(), "' holds ", some_names(stale), " of an earlier "
        "export that this one does not write (another shard layout): left beside the new "
        "files they would mix two exports, and --force deletes nothing; remove them, or "
        "choose another directory"));
  for (const std::string& name : exported) {
    const fs::path from = built / name, to = destination.dir / name;
    if (::rename(from.c_str(), to.c_str()) != 0)
      checkpoint::detail::fail_errno(format("cannot move '", from.string(), "' to"), to, errno);
  }
  checkpoint::fsync_directory(destination.dir);
  return others;
}

}  // namespace sdp
