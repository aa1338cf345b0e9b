// The safetensors writer and reader: round trips, the on-disk layout, an
// independent check with numpy, and clear errors for corrupted files.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/checksum.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "test/test_checkpoint_support.h"
#include "test/test_support.h"

using namespace sdp;
using namespace sdp::checkpoint;
using sdp::testing::Arena;
using sdp::testing::list_dir;
using sdp::testing::read_bytes;
using sdp::testing::TempDir;
using sdp::testing::write_bytes;

namespace {

// Random bytes (any bit pattern, NaNs included: the format is byte-exact).
void fill_bytes(const Tensor& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<unsigned char>(rng());
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

uint64_t read_u64_le(const std::vector<uint8_t>& b, size_t at) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[at + static_cast<size_t>(i)]) << (8 * i);
  return n;
}

// A file with the given header text (padded to 8 if asked) and data buffer.
void write_raw_safetensors(const std::filesystem::path& p, std::string header,
                           const std::vector<uint8_t>& buffer, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(header.size() >> (8 * i));
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(len, 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
}

struct Fixture {
  Arena arena;
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata{{"format", "pt"}, {"step", "100"}, {"note", "ünïcode ✓"}};

  Fixture() {
    add("model.embed_tokens.weight", {4, 3}, DType::f32);
    add("scalar", {}, DType::f32);
    add("empty", {0, 3}, DType::f32);
    add("f64.a", {5}, DType::f64);
    add("f64.b", {2, 1, 2}, DType::f64);
    add("bf16.a", {3, 2}, DType::bf16);
    add("bf16.b", {7}, DType::bf16);  // odd byte count: later offsets are not 4-aligned
    add("i32.a", {2, 2}, DType::i32);
    add("i32.b", {1}, DType::i32);
    add("u16.a", {2, 2, 2}, DType::u16);
    add("u16.b", {3}, DType::u16);
  }
  void add(const std::string& name, Shape shape, DType dtype) {
    Tensor t = arena.make(shape, dtype);
    fill_bytes(t, tensors.size() + 1);
    tensors.push_back({name, t});
  }
};

}  // namespace

TEST_CASE("safetensors round trip is byte-exact for every dtype, with metadata", "[checkpoint]") {
  TempDir dir;
  Fixture fx;
  const auto file = dir / "model.safetensors";
  save_safetensors(file, fx.tensors, fx.metadata);
  REQUIRE(list_dir(dir.path()) == std::set<std::string>{"model.safetensors"});

  SafetensorsFile f(file);
  std::vector<std::string> expected_names;
  for (const auto& nt : fx.tensors) expected_names.push_back(nt.name);
  REQUIRE(f.names() == expected_names);  // file order = the order given
  REQUIRE(f.metadata() == fx.metadata);
  for (const auto& nt : fx.tensors) {
    INFO(nt.name);
    const auto info = f.info(nt.name);
    REQUIRE(info.dtype == nt.tensor.dtype());
    REQUIRE(info.shape == nt.tensor.shape());
    REQUIRE(info.nbytes == nt.tensor.bytes());
    REQUIRE(f.dtype_string(nt.name) == safetensors_dtype(nt.tensor.dtype()));
    Tensor back = fx.arena.make(nt.tensor.shape(), nt.tensor.dtype());
    f.read_into(nt.name, back);
    REQUIRE(same_bytes(back, nt.tensor));
  }
  // No metadata at all is fine too, and a moved-from reader is closed.
  save_safetensors(file, std::span(fx.tensors).first(2));
  SafetensorsFile g(file);
  REQUIRE(g.metadata().empty());
  REQUIRE(g.names() == std::vector<std::string>{"model.embed_tokens.weight", "scalar"});
  SafetensorsFile h = std::move(g);
  REQUIRE_FALSE(g.is_open());
  REQUIRE(h.contains("scalar"));
}

TEST_CASE("safetensors on-disk layout follows the format", "[checkpoint]") {
  TempDir dir;
  Fixture fx;
  const auto file = dir / "layout.safetensors";
  save_safetensors(file, fx.tensors, fx.metadata);
  const auto bytes = read_bytes(file);
  REQUIRE(bytes.size() >= 8);
  const uint64_t n = read_u64_le(bytes, 0);
  REQUIRE(n % 8 == 0);
  REQUIRE(8 + n <= bytes.size());
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  REQUIRE(header.front() == '{');
  const size_t close = header.rfind('}');
  REQUIRE(close != std::string::npos);
  REQUIRE(header.size() - close - 1 < 8);  // padding only to the next multiple of 8
  for (size_t i = close + 1; i < header.size(); ++i) REQUIRE(header[i] == ' ');

  const auto json = nlohmann::ordered_json::parse(header);
  auto it = json.begin();
  REQUIRE(it.key() == "__metadata__");
  for (const auto& [k, v] : fx.metadata) REQUIRE(json["__metadata__"][k] == v);
  ++it;
  uint64_t offset = 0;
  const uint64_t buffer_start = 8 + n;
  for (const auto& nt : fx.tensors) {  // laid out in the order given
    INFO(nt.name);
    REQUIRE(it != json.end());
    REQUIRE(it.key() == nt.name);
    const auto& e = it.value();
    REQUIRE(e.size() == 3);
    REQUIRE(e["dtype"] == std::string(safetensors_dtype(nt.tensor.dtype())));
    REQUIRE(e["shape"] == std::vector<int64_t>(nt.tensor.shape().begin(), nt.tensor.shape().end()));
    REQUIRE(e["data_offsets"][0].get<uint64_t>() == offset);
    REQUIRE(e["data_offsets"][1].get<uint64_t>() == offset + nt.tensor.bytes());
    if (nt.tensor.bytes() > 0)
      REQUIRE(std::memcmp(bytes.data() + buffer_start + offset, nt.tensor.raw(), nt.tensor.bytes()) == 0);
    offset += nt.tensor.bytes();
    ++it;
  }
  REQUIRE(it == json.end());
  REQUIRE(buffer_start + offset == bytes.size());
  // Spot check of the dtype strings the format uses.
  REQUIRE(json["bf16.a"]["dtype"] == "BF16");
  REQUIRE(json["u16.a"]["dtype"] == "U16");
  REQUIRE(json["scalar"]["shape"] == nlohmann::json::array());
}

namespace {
const char* kNumpyScript = R"PY(
import json, struct, sys
import numpy as np
mode, path = sys.argv[1], sys.argv[2]
KINDS = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "U16": "<u2", "BF16": "<u2", "F16": "<f2"}
if mode == "read":
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    buf = raw[8 + n:]
    out = {"__metadata__": header.pop("__metadata__", {})}
    for name, e in header.items():
        b, end = e["data_offsets"]
        a = np.frombuffer(buf[b:end], dtype=KINDS[e["dtype"]]).reshape(e["shape"])
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = {"dtype": e["dtype"], "shape": list(a.shape),
                     "values": [float(x) if a.dtype.kind == "f" else int(x) for x in a.ravel()],
                     "checksum": float(np.sum(a.astype(np.float64)))}
    print(json.dumps(out))
else:
    arrays = {
        "w": np.arange(6, dtype="<f4").reshape(2, 3) / 4,
        "ids": np.array([1, -2, 3, 2**31 - 1], dtype="<i4"),
        "half": np.array([1.5, 2.0], dtype="<f2"),
        "d": np.array([[np.pi], [np.e]], dtype="<f8"),
        "u": np.array([0, 65535, 7], dtype="<u2"),
    }
    names = {"w": "F32", "ids": "I32", "half": "F16", "d": "F64", "u": "U16"}
    header, blobs, off = {"__metadata__": {"source": "numpy"}}, [], 0
    for k in ["d", "w", "half", "ids", "u"]:
        data = arrays[k].tobytes()
        header[k] = {"dtype": names[k], "shape": list(arrays[k].shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data); off += len(data)
    h = json.dumps(dict(sorted(header.items()))).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
)PY";

bool have_python_numpy() {
  return std::filesystem::exists("/usr/bin/python3") &&
         std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}
}  // namespace

TEST_CASE("safetensors files agree with an independent numpy parser", "[checkpoint]") {
  if (!have_python_numpy()) {
    WARN("skipping the numpy cross-check: /usr/bin/python3 with numpy not found");
    return;
  }
  TempDir dir;
  {
    std::ofstream(dir / "check.py") << kNumpyScript;
  }
  const std::string py = "/usr/bin/python3 '" + (dir / "check.py").string() + "' ";

  SECTION("numpy reads what we write") {
    Arena arena;
    std::vector<NamedTensor> tensors;
    Tensor a = arena.make({2, 3}, DType::f32), b = arena.make({3}, DType::f64),
           c = arena.make({2, 2}, DType::bf16), d = arena.make({4}, DType::i32),
           e = arena.make({1, 3}, DType::u16);
    for (int i = 0; i < 6; ++i) a.data<float>()[i] = 0.25f * static_cast<float>(i) - 1.0f;
    b.data<double>()[0] = 3.141592653589793, b.data<double>()[1] = -1e300, b.data<double>()[2] = 0.1;
    for (int i = 0; i < 4; ++i) c.data<bf16>()[i] = bf16::from_float(1.5f * static_cast<float>(i) - 2.f);
    const int32_t ints[] = {-7, 0, 2147483647, -2147483647};
    std::memcpy(d.raw(), ints, sizeof(ints));
    const uint16_t us[] = {0, 1, 65535};
    std::memcpy(e.raw(), us, sizeof(us));
    tensors = {{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"e", e}};
    save_safetensors(dir / "ours.safetensors", tensors, {{"k", "v"}});
    const std::string cmd = py + "read '" + (dir / "ours.safetensors").string() + "' > '" +
                            (dir / "out.json").string() + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const auto out = nlohmann::json::parse(std::ifstream(dir / "out.json"));
    // The caller's metadata, and the writer's CRC-32C of every tensor's bytes.
    nlohmann::json expected_metadata{{"k", "v"}};
    for (const auto& nt : tensors)
      expected_metadata[std::string(kChecksumKeyPrefix) + nt.name] =
          crc32c_hex(crc32c(nt.tensor.raw(), static_cast<size_t>(nt.tensor.bytes())));
    REQUIRE(out["__metadata__"] == expected_metadata);
    REQUIRE(out.size() == 6);
    for (const auto& nt : tensors) {
      INFO(nt.name);
      const auto& o = out[nt.name];
      REQUIRE(o["dtype"] == std::string(safetensors_dtype(nt.tensor.dtype())));
      REQUIRE(o["shape"] == std::vector<int64_t>(nt.tensor.shape().begin(), nt.tensor.shape().end()));
      double sum = 0;
      for (int64_t i = 0; i < nt.tensor.numel(); ++i) {
        double v = 0;
        switch (nt.tensor.dtype()) {
          case DType::f32: v = nt.tensor.data<float>()[i]; break;
          case DType::f64: v = nt.tensor.data<double>()[i]; break;
          case DType::bf16: v = nt.tensor.data<bf16>()[i].to_float(); break;
          case DType::i32: v = nt.tensor.data<int32_t>()[i]; break;
          case DType::u16: v = nt.tensor.data<uint16_t>()[i]; break;
        }
        REQUIRE(o["values"][static_cast<size_t>(i)].get<double>() == v);
        sum += v;
      }
      REQUIRE(o["checksum"].get<double>() == Approx(sum).epsilon(1e-12));
    }
  }

  SECTION("we read what numpy writes (any order, no padding, an F16 tensor)") {
    const auto file = dir / "theirs.safetensors";
    REQUIRE(std::system((py + "write '" + file.string() + "'").c_str()) == 0);
    SafetensorsFile f(file);
    REQUIRE(f.names() == std::vector<std::string>{"d", "w", "half", "ids", "u"});  // offset order
    REQUIRE(f.metadata() == std::map<std::string, std::string>{{"source", "numpy"}});
    Arena arena;
    Tensor w = arena.make({2, 3}, DType::f32);
    f.read_into("w", w);
    for (int i = 0; i < 6; ++i) REQUIRE(w.data<float>()[i] == static_cast<float>(i) / 4);
    Tensor d = arena.make({2, 1}, DType::f64);
    f.read_into("d", d);
    REQUIRE(d.data<double>()[0] == 3.141592653589793);
    REQUIRE(d.data<double>()[1] == 2.718281828459045);
    Tensor ids = arena.make({4}, DType::i32);
    f.read_into("ids", ids);
    REQUIRE(ids.data<int32_t>()[1] == -2);
    REQUIRE(ids.data<int32_t>()[3] == 2147483647);
    Tensor u = arena.make({3}, DType::u16);
    f.read_into("u", u);
    REQUIRE(u.data<uint16_t>()[1] == 65535);
    REQUIRE(f.dtype_string("half") == "F16");
    REQUIRE_THROWS_WITH(f.info("half"), Catch::Contains("unsupported dtype F16") &&
                                            Catch::Contains("supported: F32, F64, BF16, I32, U16"));
  }
}

TEST_CASE("safetensors writer rejects bad input", "[checkpoint]") {
  TempDir dir;
  Arena arena;
  Tensor a = arena.make({2, 3}, DType::f32);
  std::vector<NamedTensor> dup{{"x", a}, {"y", a}, {"x", a}};
  REQUIRE_THROWS_WITH(save_safetensors(dir / "d.safetensors", dup),
                      Catch::Contains("'x'") && Catch::Contains("duplicate tensor name"));
  std::vector<NamedTensor> strided{{"n", a.narrow(1, 0, 2)}};
  REQUIRE_THROWS_WITH(save_safetensors(dir / "s.safetensors", strided),
                      Catch::Contains("'n'") && Catch::Contains("not contiguous"));
  std::vector<NamedTensor> reserved{{"__metadata__", a}};
  REQUIRE_THROWS_WITH(save_safetensors(dir / "r.safetensors", reserved), Catch::Contains("reserved"));
  REQUIRE(list_dir(dir.path()).empty());
}

TEST_CASE("safetensors reader reports corrupted files clearly", "[checkpoint]") {
  TempDir dir;
  const auto p = dir / "bad.safetensors";
  const std::vector<uint8_t> twelve(12, 0);

  SECTION("missing file") {
    REQUIRE_THROWS_WITH(SafetensorsFile(dir / "nope.safetensors"),
                        Catch::Contains("nope.safetensors") && Catch::Contains("No such file"));
  }
  SECTION("shorter than 8 bytes") {
    write_bytes(p, {1, 2, 3});
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("bad.safetensors") &&
                                                Catch::Contains("shorter than the 8-byte header length"));
  }
  SECTION("header length beyond the file") {
    std::vector<uint8_t> b(64, ' ');
    for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = 0;
    b[5] = 1;  // 2^40
    write_bytes(p, b);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("bad.safetensors") &&
                                                Catch::Contains("header length 1099511627776 exceeds the file size"));
  }
  SECTION("truncated data") {
    Arena arena;
    std::vector<NamedTensor> t{{"w", arena.make({4}, DType::f32)}};
    save_safetensors(p, t);
    auto bytes = read_bytes(p);
    bytes.resize(bytes.size() - 4);
    write_bytes(p, bytes);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("tensor 'w'") &&
                                                Catch::Contains("outside the data buffer of 12 bytes"));
  }
  SECTION("invalid JSON") {
    write_raw_safetensors(p, R"({"w": {"dtype": "F32", )", twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("bad.safetensors") &&
                                                Catch::Contains("invalid JSON header"));
  }
  SECTION("not an object") {
    write_raw_safetensors(p, "[1, 2]", {});
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("does not start with '{'"));
  }
  SECTION("unknown dtype") {
    write_raw_safetensors(p, R"({"w": {"dtype": "Q4", "shape": [3], "data_offsets": [0, 12]}})", twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("tensor 'w'") && Catch::Contains("unknown dtype 'Q4'"));
  }
  SECTION("overlapping offsets") {
    write_raw_safetensors(p,
                          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                          R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                          twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("tensor 'b'") && Catch::Contains("overlaps tensor 'a'"));
  }
  SECTION("hole between tensors") {
    write_raw_safetensors(p,
                          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                          twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("hole of 4 bytes") && Catch::Contains("tensor 'b'"));
  }
  SECTION("trailing bytes") {
    write_raw_safetensors(p, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("4 trailing bytes"));
  }
  SECTION("offsets that do not match dtype and shape") {
    write_raw_safetensors(p, R"({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 12]}})", twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("tensor 'a'") && Catch::Contains("hold 12 bytes") &&
                                                Catch::Contains("F64 and shape [2] need 16"));
  }
  SECTION("duplicate names") {
    write_raw_safetensors(p,
                          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                          twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("duplicate tensor name 'a'"));
  }
  SECTION("metadata must be strings") {
    write_raw_safetensors(p, R"({"__metadata__": {"step": 100}, "a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})",
                          twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("'step'") && Catch::Contains("must be strings"));
  }
  SECTION("bad shape entry") {
    write_raw_safetensors(p, R"({"a": {"dtype": "F32", "shape": [-3], "data_offsets": [0, 12]}})", twelve);
    REQUIRE_THROWS_WITH(SafetensorsFile(p), Catch::Contains("not a non-negative integer"));
  }
}

TEST_CASE("read_into checks dtype, shape and name", "[checkpoint]") {
  TempDir dir;
  Arena arena;
  Tensor w = arena.make({2, 3}, DType::f32);
  fill_bytes(w, 7);
  std::vector<NamedTensor> t{{"layers.0.w", w}};
  save_safetensors(dir / "m.safetensors", t);
  SafetensorsFile f(dir / "m.safetensors");
  Tensor wrong_dtype = arena.make({2, 3}, DType::f64);
  REQUIRE_THROWS_WITH(f.read_into("layers.0.w", wrong_dtype),
                      Catch::Contains("'layers.0.w'") && Catch::Contains("expected F64 (f64), found F32"));
  Tensor wrong_shape = arena.make({3, 2}, DType::f32);
  REQUIRE_THROWS_WITH(f.read_into("layers.0.w", wrong_shape),
                      Catch::Contains("'layers.0.w'") && Catch::Contains("expected [3, 2], found [2, 3]"));
  Tensor big = arena.make({2, 4}, DType::f32);
  REQUIRE_THROWS_WITH(f.read_into("layers.0.w", big.narrow(1, 0, 3)), Catch::Contains("not contiguous"));
  REQUIRE_THROWS_WITH(f.read_into("layers.1.w", w), Catch::Contains("no tensor 'layers.1.w'"));
  Tensor ok = arena.make({2, 3}, DType::f32);
  f.read_into("layers.0.w", ok);
  REQUIRE(same_bytes(ok, w));
}
