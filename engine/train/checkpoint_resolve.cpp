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

fs::path resolve_checkpoint(const fs::path& path) {
  if (fs::exists(state_file_of(path))) return path;
  if (fs::exists(path / "latest")) {
    const auto latest = checkpoint::read_json_file(path / "latest");
    if (!latest.contains("checkpoint") || !latest["checkpoint"].is_string())
      fail("resume: ", (path / "latest").string(), " has no \"checkpoint\" string field");
    const fs::path dir = path / latest["checkpoint"].get<std::string>();
    if (!fs::exists(state_file_of(dir)))
      fail("resume: ", (path / "latest").string(), " names ", dir.string(),
           ", which holds no ", kStateFileName);
    return dir;
  }
  fail("resume: no checkpoint at '", path.string(),
       "' (expected a checkpoint directory with ", kStateFileName, ", or a save dir with a "
       "'latest' file)");
}

}  // namespace sdp
