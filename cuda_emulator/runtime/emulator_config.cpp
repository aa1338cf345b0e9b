#include "cuda_emulator/runtime/emulator_config.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sdp::emu {

namespace {

[[noreturn]] void bad_setting(const char* name, const char* text, const char* valid) {
  std::fprintf(stderr, "sdp emulated CUDA device: %s='%s' is invalid (valid: %s)\n", name, text,
               valid);
  std::exit(2);
}

size_t parse_bytes(const char* name, const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else bad_setting(name, text, "a byte count with an optional K, M, G, T or KiB..TiB suffix");
  if (end == text || !(value > 0) || value * scale > 1e15)
    bad_setting(name, text, "a positive byte count up to about 1 PB");
  return static_cast<size_t>(value * scale);
}

EmulatorConfig read_config() {
  EmulatorConfig c;
  if (const char* text = std::getenv("SDP_CUDA_EMULATOR_DEVICES")) {
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    if (end == text || *end || n < 0 || n > 64)
      bad_setting("SDP_CUDA_EMULATOR_DEVICES", text,
                  "an integer from 0 (a machine without a GPU) to 64");
    c.device_count = static_cast<int>(n);
  }
  if (const char* text = std::getenv("SDP_CUDA_EMULATOR_MEMORY"))
    c.device_memory_bytes = parse_bytes("SDP_CUDA_EMULATOR_MEMORY", text);
  if (const char* text = std::getenv("SDP_CUDA_EMULATOR_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    if (end == text || *end || !(s > 0) || s > 1e6)
      bad_setting("SDP_CUDA_EMULATOR_TIMEOUT", text, "seconds, more than 0 and at most 1e6");
    c.timeout_seconds = s;
  }
  return c;
}

}  // namespace

const EmulatorConfig& config() {
  static const EmulatorConfig c = read_config();
  return c;
}

}  // namespace sdp::emu
