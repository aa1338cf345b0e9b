// Times one Trainer::save_checkpoint of a job and measures rank 0's peak
// host memory during it, for either checkpoint form (hf: rank 0 assembles
// the whole model; sharded: every rank writes its own parts). Run under
// mpirun (bench/checkpoint_save.sh); rank 0 prints one JSON line.
//
//   mpirun -np 4 build/bin/bench_checkpoint_save --model llama-134m
//       --strategy b-sdp --active-fraction 0.5 --format sharded --dir /tmp/ck
//
// Peak memory: Linux's high-water mark of the resident set (VmHWM in
// /proc/self/status), reset just before the save (writing 5 to
// /proc/self/clear_refs); the figure is that peak less the resident set
// before the save. Each process saves once: the hf form keeps the full
// model it assembles for later saves, so a second save would hide it.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/mpi_runtime.h"
#include "engine/train/trainer.h"

namespace {

// A field of /proc/self/status in bytes ("VmRSS:  1234 kB"); 0 if absent.
uint64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time a checkpoint save and measure rank 0's peak host memory during it"};
  sdp::TrainConfig c;
  c.model = "small";
  c.batch = 1;
  c.seq = 16;
  c.steps = 1;
  c.eval_every = 0;
  c.progress = false;
  c.comm_timeout = 3600;
  std::string dir = "/tmp/sdp_bench_checkpoint";
  app.add_option("--model", c.model, "Model name");
  app.add_option("--strategy", c.parallel.strategy, "ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp");
  app.add_option("--active-fraction", c.parallel.active_fraction, "C of SDP strategies");
  app.add_option("--shard", c.parallel.shard, "none, optimizer, grad, full");
  app.add_option("--format", c.checkpoint_format, "hf or sharded");
  app.add_option("--batch", c.batch, "Sequences per rank in the one training step");
  app.add_option("--seq", c.seq, "Tokens per sequence");
  app.add_option("--dir", dir, "Checkpoint directory to write (removed afterwards)");
  CLI11_PARSE(app, argc, argv);
  try {
    std::optional<sdp::comm::MpiRuntime> mpi;
    if (sdp::comm::MpiRuntime::launched_by_mpi()) mpi.emplace(argc, argv);
    auto world = sdp::comm::make_world(mpi ? "mpi" : "local");
    c.validate();
    nlohmann::json out;
    {
      sdp::Trainer trainer(c, *world);
      trainer.train_step();  // AdamW moments exist and are saved
      world->barrier();
      const bool reset = reset_peak_resident();
      const uint64_t before = status_bytes("VmRSS");
      const auto t0 = std::chrono::steady_clock::now();
      trainer.save_checkpoint(dir);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const uint64_t peak = status_bytes("VmHWM");
      uint64_t bytes = 0;
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file()) bytes += e.file_size();
      out = {{"model", c.model},
             {"parameters", trainer.model().parameter_count()},
             {"strategy", c.parallel.strategy},
             {"active_fraction", c.parallel.active_fraction},
             {"shard", std::string(sdp::shard_level_name(c.parallel.shard_level()))},
             {"format", c.checkpoint_format},
             {"ranks", world->size()},
             {"save_seconds", seconds},
             {"rank0_rss_before_bytes", before},
             {"rank0_peak_increase_bytes", reset && peak > before ? peak - before : 0},
             {"peak_reset", reset},
             {"checkpoint_bytes", bytes}};
      world->barrier();
    }
    if (world->rank() == 0) {
      std::filesystem::remove_all(dir);
      std::printf("%s\n", out.dump().c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint_save: error: %s\n", e.what());
    return 1;
  }
}
