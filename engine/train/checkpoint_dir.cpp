#include "engine/train/checkpoint_dir.h"

#include <cstdio>

#include "engine/checkpoint/json_file.h"
#include "engine/train/trainer.h"

namespace sdp {

namespace fs = std::filesystem;

fs::path save_and_mark_latest(Trainer& trainer, const fs::path& save_dir) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(trainer.step()));
  fs::create_directories(save_dir);
  const fs::path dir = save_dir / name;
  trainer.save_checkpoint(dir);  // collective; rank 0 writes
  if (trainer.world().rank() == 0)
    checkpoint::write_json_atomically(save_dir / "latest",
                                    {{"checkpoint", name}, {"step", trainer.step()}});
  return dir;
}

}  // namespace sdp
