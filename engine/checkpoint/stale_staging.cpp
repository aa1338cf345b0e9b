#include "engine/checkpoint/stale_staging.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;

namespace sdp::checkpoint {
namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// FNV-1a: a stable 32-bit digest, printed as 8 hex digits.
uint32_t fnv1a(std::string_view text) {
  uint32_t h = 2166136261u;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "host";
  std::string name;
  for (const char* c = buf; *c != '\0' && name.size() < 32; ++c) {
    const bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                       (*c >= '0' && *c <= '9');
    name.push_back(plain ? *c : '_');  // '-' separates the fields of a staging name
  }
  return name;
}

// The kernel's boot id changes at every boot; the PID namespace tells apart
// containers that share a kernel and a host name but not their PIDs.
std::string machine_digest() {
  std::string identity = read_first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (n > 0) identity += std::string(ns, static_cast<size_t>(n));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", fnv1a(identity));
  return hex;
}

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!pred(c)) return false;
  return true;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }
bool is_host_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool process_exists(long pid) {
  // kill(pid, 0) delivers nothing; EPERM means it exists under another user.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

const std::string& staging_machine_tag() {
  static const std::string tag = host_name() + "-" + machine_digest();
  return tag;
}

std::optional<StagingOwner> parse_staging_name(std::string_view file_name) {
  const size_t dot = file_name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  std::vector<std::string_view> fields;
  std::string_view rest = file_name.substr(dot + 1);
  for (size_t dash; (dash = rest.find('-')) != std::string_view::npos; rest.remove_prefix(dash + 1))
    fields.push_back(rest.substr(0, dash));
  fields.push_back(rest);
  // kind, host, machine, pid, counter, random
  if (fields.size() != 6 || (fields[0] != "tmp" && fields[0] != "old")) return std::nullopt;
  if (!all_of(fields[1], is_host_char) || fields[2].size() != 8 || !all_of(fields[2], is_hex) ||
      !all_of(fields[3], is_digit) || fields[3].size() > 9 || !all_of(fields[4], is_digit) ||
      !all_of(fields[5], is_hex))
    return std::nullopt;
  StagingOwner owner;
  owner.kind = std::string(fields[0]);
  owner.machine = std::string(fields[1]) + "-" + std::string(fields[2]);
  owner.pid = std::stol(std::string(fields[3]));
  if (owner.pid <= 0) return std::nullopt;  // kill() reads 0 and below as process groups
  return owner;
}

int remove_stale_staging(const fs::path& dir) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<StagingOwner> owner = parse_staging_name(name);
    if (!owner || owner->machine != staging_machine_tag() || process_exists(owner->pid)) continue;
    if (owner->kind == "old") {
      const fs::path target = dir / name.substr(0, name.rfind('.'));
      if (!fs::exists(fs::symlink_status(target, ec))) continue;
    }
    stale.push_back(it->path());
  }
  int removed = 0;
  for (const fs::path& p : stale) {
    std::error_code remove_ec;
    if (fs::remove_all(p, remove_ec) > 0 && !remove_ec) ++removed;
  }
  return removed;
}

}  // namespace sdp::checkpoint
