// The reading side of checkpoint directories (declared in checkpoint_dir.h):
// finding a checkpoint to resume from. Apart from the saving side, which
// needs the whole Trainer, so that tools and the fuzz build can link it alone.
#include <string>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"

namespace sdp {

namespace fs = std::filesystem;

fs::path state_file_of(const fs::path& dir) {
  const fs::path current = dir / kStateFileName;
  if (!fs::exists(current) && fs::exists(dir / kLegacyStateFileName))
    return dir / kLegacyStateFileName;
  return current;
}

namespace {

// Whether `inner` lies strictly below `outer` (both canonical).
bool strictly_inside(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return i != inner.end();
}

// The checkpoint directory that save_dir/latest names. The name must lead,
// after every symlink is followed, to a directory inside the save directory:
// a `latest` written by another tool or edited by hand ("../../other/...",
// an absolute path) must not make a job resume, and later save beside,
// another run's state.
fs::path follow_latest(const fs::path& save_dir) {
  const fs::path file = save_dir / "latest";
  const auto latest = checkpoint::read_json_file(file);
  if (!latest.is_object() || !latest.contains("checkpoint") || !latest["checkpoint"].is_string())
    throw PermanentError(format("resume: ", file.string(),
                                " has no \"checkpoint\" string field (expected "
                                "{\"checkpoint\": \"step-NNNNNN\", ...})"));
  const std::string name = latest["checkpoint"].get<std::string>();
  const std::string as_written = latest["checkpoint"].dump();  // quoted, escaped
  auto refuse = [&](const std::string& why) {
    throw PermanentError(format("resume: ", file.string(), ": checkpoint = ", as_written, " ",
                                why, " (valid: the name of a checkpoint directory inside the "
                                "save directory '", save_dir.string(), "', such as \"step-000010\")"));
  };
  if (name.empty() || name.find('\0') != std::string::npos)
    refuse("is not a directory name");
  if (fs::path(name).is_absolute()) refuse("is an absolute path");
  std::error_code ec;
  const fs::path root = fs::canonical(save_dir, ec);
  if (ec) fail("resume: cannot resolve the save directory '", save_dir.string(), "': ",
               ec.message());
  const fs::path dir = fs::weakly_canonical(save_dir / name, ec);
  if (ec) refuse(format("cannot be resolved: ", ec.message()));
  if (!strictly_inside(dir, root))
    refuse(format("leads to '", dir.string(), "', outside the save directory"));
  if (!fs::exists(state_file_of(dir)))
    throw PermanentError(format("resume: ", file.string(), " names ", (save_dir / name).string(),
                                ", which holds no ", kStateFileName));
  return save_dir / name;
}

}  // namespace

fs::path resolve_checkpoint(const fs::path& path) {
  if (fs::exists(state_file_of(path))) return path;
  if (fs::exists(path / "latest")) return follow_latest(path);
  throw PermanentError(format("resume: no checkpoint at '", path.string(),
                              "' (expected a checkpoint directory with ", kStateFileName,
                              ", or a save dir with a 'latest' file)"));
}

}  // namespace sdp
