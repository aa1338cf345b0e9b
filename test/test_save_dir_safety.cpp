// What keeps a save directory safe: one job at a time (the lock), a
// writability check at start-up, a `latest` that cannot lead out of the
// directory, and an export that refuses to replace what it did not write.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "engine/checkpoint/save_dir_lock.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/export_destination.h"
#include "test/test_checkpoint_support.h"

using namespace sdp;
using sdp::checkpoint::SaveDirLock;
using sdp::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A child process that takes the lock on `dir`, tells the parent so through
// a pipe, and then waits for its stdin pipe to close (or to be killed).
struct LockingChild {
  pid_t pid = -1;
  int release_fd = -1;

  explicit LockingChild(const fs::path& dir) {
    int ready[2], release[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(release) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      try {
        SaveDirLock lock(dir);
        const char byte = 'L';
        if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
        char ignored;
        while (::read(release[0], &ignored, 1) > 0) {
        }
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_fd = release[1];
    char byte = 0;
    const ssize_t n = ::read(ready[0], &byte, 1);  // waits until the child holds the lock
    ::close(ready[0]);
    REQUIRE(n == 1);
  }
  // Ends the child normally (it releases the lock on exit); returns its status.
  int release() {
    ::close(release_fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
  void kill_hard() {
    ::kill(pid, SIGKILL);
    ::close(release_fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

}  // namespace

TEST_CASE("save directory lock: a second job is refused naming the holder", "[checkpoint]") {
  TempDir tmp;
  const fs::path dir = tmp / "ck";
  LockingChild holder(dir);
  try {
    SaveDirLock second(dir);
    FAIL("a second lock on a held save directory was granted");
  } catch (const PermanentError& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("is in use by another job"));
    CHECK_THAT(message, Catch::Contains("pid " + std::to_string(holder.pid)));
    CHECK_THAT(message, Catch::Contains((dir / SaveDirLock::kFileName).string()));
  }
  CHECK(holder.release() == 0);
  // The holder has ended: its lock with it.
  SaveDirLock after(dir);
  CHECK(after.locked());
}

TEST_CASE("save directory lock: one process cannot hold it twice either", "[checkpoint]") {
  TempDir tmp;
  SaveDirLock first(tmp.path());
  CHECK_THROWS_AS(SaveDirLock(tmp.path()), PermanentError);
}

TEST_CASE("save directory lock: a killed holder's lock file does not block", "[checkpoint]") {
  TempDir tmp;
  const fs::path dir = tmp / "ck";
  LockingChild holder(dir);
  const pid_t killed = holder.pid;
  holder.kill_hard();
  const fs::path file = dir / SaveDirLock::kFileName;
  REQUIRE(fs::exists(file));  // left behind, naming the dead holder
  CHECK_THAT(read_text(file), Catch::Contains("\"pid\":" + std::to_string(killed)));
  SaveDirLock lock(dir);
  CHECK(lock.locked());
  CHECK_THAT(read_text(file), Catch::Contains("\"pid\":" + std::to_string(::getpid())));
}

TEST_CASE("save directory check: an unwritable path is a permanent error", "[checkpoint]") {
  // A path through a regular file cannot be created even by root (chmod
  // does not stop root, and CI runs tests as root).
  TempDir tmp;
  write_text(tmp / "file", "not a directory\n");
  try {
    checkpoint::check_directory_writable(tmp / "file" / "ck");
    FAIL("a save directory under a regular file was accepted");
  } catch (const PermanentError& e) {
    CHECK_THAT(e.what(), Catch::Contains((tmp / "file" / "ck").string()));
  }
  checkpoint::check_directory_writable(tmp / "fine");
  CHECK(fs::is_directory(tmp / "fine"));
  CHECK(fs::is_empty(tmp / "fine"));  // the probe is gone
}

TEST_CASE("latest must name a checkpoint inside the save directory", "[checkpoint]") {
  TempDir tmp;
  const fs::path save = tmp / "runs" / "ck";
  write_text(save / "step-000002" / kStateFileName, "{}");
  write_text(tmp / "other" / "step-000010" / kStateFileName, "{}");
  auto latest_names = [&](const std::string& name) {
    write_text(save / "latest", "{\"checkpoint\": \"" + name + "\", \"step\": 10}");
  };
  auto refused = [&](const std::string& as_written, const std::string& why) {
    try {
      (void)resolve_checkpoint(save);
      FAIL("latest = " << as_written << " was followed");
    } catch (const PermanentError& e) {
      CHECK_THAT(e.what(), Catch::Contains((save / "latest").string()));
      CHECK_THAT(e.what(), Catch::Contains("checkpoint = \"" + as_written + "\" " + why));
    }
  };

  latest_names("step-000002");
  CHECK(resolve_checkpoint(save) == save / "step-000002");
  latest_names("../../other/step-000010");
  refused("../../other/step-000010", "leads to");
  latest_names((tmp / "other" / "step-000010").string());
  refused((tmp / "other" / "step-000010").string(), "is an absolute path");
  latest_names(".");
  refused(".", "leads to");
  // A symlink inside the save directory is followed before the check.
  fs::create_directory_symlink(tmp / "other" / "step-000010", save / "step-000010");
  latest_names("step-000010");
  refused("step-000010", "leads to");
}

TEST_CASE("export destination: refuses a non-empty foreign directory unless --force",
          "[checkpoint]") {
  TempDir tmp;
  const fs::path checkpoint = tmp / "ck" / "step-000004";
  write_text(checkpoint / kStateFileName, "{}");
  write_text(tmp / "victim" / "notes.txt", "precious\n");
  CHECK_THROWS_AS(check_export_destination(checkpoint, checkpoint, tmp / "victim", false),
                  PermanentError);
  const ExportDestination beside =
      check_export_destination(checkpoint, checkpoint, tmp / "victim", true);
  CHECK(beside.placement == ExportPlacement::beside_files);
  const int others = write_export(beside, [](const fs::path& into) {
    write_text(into / "model.safetensors", "weights");
    write_text(into / kStateFileName, "{}");
  });
  CHECK(others == 1);
  CHECK(read_text(tmp / "victim" / "notes.txt") == "precious\n");
  CHECK(read_text(tmp / "victim" / "model.safetensors") == "weights");
  CHECK(sdp::testing::list_dir(tmp.path()).count("victim") == 1);
  CHECK(sdp::testing::list_dir(tmp.path()).size() == 2);  // no staging left beside it
}

TEST_CASE("export destination: never the checkpoint or a save directory", "[checkpoint]") {
  TempDir tmp;
  const fs::path save = tmp / "runs" / "ck";
  const fs::path checkpoint = save / "step-000004";
  write_text(checkpoint / kStateFileName, "{}");
  write_text(save / "step-000002" / kStateFileName, "{}");
  write_text(save / "latest", "{\"checkpoint\": \"step-000004\", \"step\": 4}");
  for (const fs::path& out : {save, checkpoint, checkpoint / "x", save / "hf", tmp / "runs"}) {
    INFO("output " << out);
    CHECK_THROWS_AS(check_export_destination(checkpoint, save, out, true), PermanentError);
  }
  // Another save directory below the output.
  write_text(tmp / "other" / "step-000001" / kStateFileName, "{}");
  CHECK_THROWS_AS(check_export_destination(tmp / "other" / "step-000001",
                                           tmp / "other" / "step-000001", tmp / "runs", true),
                  PermanentError);
  CHECK(check_export_destination(checkpoint, save, tmp / "hf", false).placement ==
        ExportPlacement::whole_directory);
}
