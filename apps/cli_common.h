#pragma once
// What every app's command line shares beyond its flags: `--version`, and a
// parse error that names the nearest known flag when one was mistyped.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sdp::app {

// "<app> <version> (<backends this build has>)": the project version and
// which backends were compiled in (CUDA: a GPU build, the emulated device or
// none; MPI; NCCL), so a bug report says what ran.
std::string version_text(const std::string& app_name);

// Adds --version, printing version_text(app_name).
void add_version_flag(CLI::App& app, const std::string& app_name);

// The long flags `app` knows ("--steps"), in its option groups too.
std::vector<std::string> known_flags(const CLI::App& app);

// The known flag nearest to `typed` by edit distance, when it is near
// enough to be a typo (at most a third of its length, and at least 1 edit
// allowed); empty otherwise.
std::string nearest_flag(const std::string& typed, const std::vector<std::string>& known);

// Reports a parse error as CLI11 does (help and --version go to stdout) and,
// for an unknown flag, adds "<app_name>: unknown flag --x: did you mean
// --y?" on stderr. Returns CLI11's exit status: 0 for help and version.
int report_parse_error(const CLI::App& app, const std::string& app_name,
                       const CLI::ParseError& error);

}  // namespace sdp::app
