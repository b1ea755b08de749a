// Safetensors: mapping, header validation, zero-copy views; sharded checkpoints.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "luminal/error.hpp"
#include "luminal/safetensors.hpp"

namespace luminal {

namespace io {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw RuntimeError("[load_safetensors] '" + what + "': " + msg);
}

std::optional<DType> supported_dtype(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "I32") return DType::i32;
  if (s == "BOOL") return DType::boolean;
  return std::nullopt;
}

bool known_dtype(const std::string& s) {
  static const char* const known[] = {"F64",     "I64",     "U64",     "U32",     "I16",      "U16",
                                      "I8",      "U8",      "F8_E4M3", "F8_E5M2", "F8_E8M0",  "F6_E2M3",
                                      "F6_E3M2", "F4",      "C64",     "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
  for (const char* k : known)
    if (s == k) return true;
  return false;
}

/// A JSON value as a non-negative integer, or nullopt (negative, fractional, not a number).
std::optional<uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x >= 0) return static_cast<uint64_t>(x);
  }
  return std::nullopt;
}

/// Deepest nesting a header or index may have. Real ones nest 3 levels (file object, tensor
/// entry, shape array); nlohmann parses any depth without recursion, but printing a value
/// (an error message quoting a shape) recurses once per level: a 2 MB header of nested
/// brackets overflowed the stack (found while writing fuzz_safetensors, with a crafted
/// input through its replay driver).
constexpr int kMaxJsonDepth = 64;

/// Parses JSON text, rejecting duplicate keys of the top-level object (nlohmann would
/// silently keep the last one) and nesting deeper than kMaxJsonDepth (the deeper values
/// are discarded while parsing, so they are never built). Invalid UTF-8 anywhere is a
/// parse error.
json parse_unique_keys(const char* first, const char* last, const std::string& what, const char* kind) {
  std::set<std::string> seen;
  std::string duplicate;
  bool too_deep = false;
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second) duplicate = k;
    }
    return true;
  };
  json h;
  try {
    h = json::parse(first, last, cb);
  } catch (const json::exception& e) {
    fail(what, std::string(kind) + " is not valid JSON (or not valid UTF-8): " + e.what());
  }
  if (too_deep)
    fail(what, std::string(kind) + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (!duplicate.empty()) fail(what, std::string(kind) + " names '" + duplicate + "' twice");
  if (!h.is_object()) fail(what, std::string(kind) + " is not a JSON object");
  return h;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

Entry parse_entry(const std::string& what, const std::string& name, const json& info, uint64_t data_len) {
  const std::string tn = "tensor '" + name + "'";
  if (!info.is_object()) fail(what, tn + ": entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail(what, tn + ": missing \"" + key + "\"");
  Entry e;
  e.name = name;
  const json& dt = info.at("dtype");
  if (!dt.is_string()) fail(what, tn + ": \"dtype\" is not a string");
  const std::string ds = dt.get<std::string>();
  const auto d = supported_dtype(ds);
  if (!d) {
    if (known_dtype(ds))
      fail(what, tn + ": dtype " + ds + " is not supported (F32, F16, BF16, I32 and BOOL are)");
    fail(what, tn + ": unknown dtype '" + ds + "'");
  }
  e.dtype = *d;
  const json& sh = info.at("shape");
  if (!sh.is_array()) fail(what, tn + ": \"shape\" is not an array");
  uint64_t numel = 1;
  for (const json& x : sh) {
    const auto v = as_u64(x);
    if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(what, tn + ": shape " + sh.dump() + " has an entry that is not a non-negative integer");
    if (__builtin_mul_overflow(numel, *v, &numel)) fail(what, tn + ": shape " + sh.dump() + " is too large");
    e.shape.push_back(static_cast<int64_t>(*v));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes) ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(what, tn + ": shape " + sh.dump() + " is too large");
  const json& off = info.at("data_offsets");
  std::optional<uint64_t> b, en;
  if (off.is_array() && off.size() == 2) b = as_u64(off[0]), en = as_u64(off[1]);
  if (!b || !en) fail(what, tn + ": \"data_offsets\" is not a pair of non-negative integers");
  e.begin = *b;
  e.end = *en;
  if (e.begin > e.end)
    fail(what, tn + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] end before they begin");
  if (e.end > data_len)
    fail(what, tn + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] run past the end of the data (" + std::to_string(data_len) +
                   " bytes after the header; the file is truncated or corrupt)");
  if (e.end - e.begin != nbytes)
    fail(what, tn + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] hold " +
                   std::to_string(e.end - e.begin) + " bytes, but " + ds + " " + shape_text(e.shape) +
                   " needs " + std::to_string(nbytes));
  return e;
}

/// A read-only private mapping of a whole file, unmapped with its last owner.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping(void* a, size_t n) : addr(a), size(n) {}
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::map<std::string, HostTensor> parse_safetensors(std::span<const std::byte> bytes, const std::string& what,
                                                    std::shared_ptr<const void> owner) {
  if (bytes.size() < 8)
    fail(what, "file is " + std::to_string(bytes.size()) +
                   " bytes, shorter than the 8-byte header length (truncated, or not a safetensors file)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (n > kMaxSafetensorsHeader)
    fail(what, "header length " + std::to_string(n) + " is absurd (more than " +
                   std::to_string(kMaxSafetensorsHeader) + " bytes; not a safetensors file?)");
  if (n > bytes.size() - 8)
    fail(what, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(bytes.size()) + " bytes; truncated?)");
  const char* hdr = reinterpret_cast<const char*>(bytes.data()) + 8;
  const json h = parse_unique_keys(hdr, hdr + n, what, "header");

  const std::byte* data = bytes.data() + 8 + n;
  const uint64_t data_len = bytes.size() - 8 - n;
  std::vector<Entry> entries;
  for (const auto& [name, info] : h.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(what, "\"__metadata__\" is not an object");
      for (const auto& [k, v] : info.items())
        if (!v.is_string()) fail(what, "\"__metadata__\" entry '" + k + "' is not a string");
      continue;
    }
    entries.push_back(parse_entry(what, name, info, data_len));
  }
  // No two tensors may share a byte (empty tensors own none).
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      fail(what, "tensors '" + by_offset[i - 1]->name + "' [" + std::to_string(by_offset[i - 1]->begin) + ", " +
                     std::to_string(by_offset[i - 1]->end) + ") and '" + by_offset[i]->name + "' [" +
                     std::to_string(by_offset[i]->begin) + ", " + std::to_string(by_offset[i]->end) +
                     ") overlap");

  std::map<std::string, HostTensor> out;
  for (Entry& e : entries) {
    const std::byte* p = data + e.begin;
    const size_t nbytes = static_cast<size_t>(e.end - e.begin);
    if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) != 0)
      out.emplace(e.name, HostTensor::from_bytes(e.dtype, std::move(e.shape), {p, nbytes}));
    else
      out.emplace(e.name, HostTensor::view(e.dtype, std::move(e.shape), p, owner));
  }
  return out;
}

std::map<std::string, HostTensor> load_safetensors_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    fail(path, "cannot stat: " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(size) +
                   " bytes, shorter than the 8-byte header length (truncated, or not a safetensors file)");
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string err = errno_text();
  ::close(fd);  // the mapping stays valid without the descriptor
  if (addr == MAP_FAILED) fail(path, "cannot map: " + err);
  auto mapping = std::make_shared<const Mapping>(addr, size);
  return parse_safetensors({static_cast<const std::byte*>(addr), size}, path, mapping);
}

}  // namespace io

namespace {

namespace fs = std::filesystem;

std::map<std::string, HostTensor> load_index(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) io::fail(path, "cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const auto idx = io::parse_unique_keys(text.data(), text.data() + text.size(), path, "index");
  if (!idx.contains("weight_map") || !idx.at("weight_map").is_object())
    io::fail(path, "index has no \"weight_map\" object");
  const auto& wm = idx.at("weight_map");
  // Duplicate tensor names inside weight_map (nested one level down).
  {
    std::set<std::string> seen;
    std::string dup;
    auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
      if (ev == nlohmann::json::parse_event_t::key && depth == 2 && dup.empty()) {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!seen.insert(k).second) dup = k;
      }
      return true;
    };
    const nlohmann::json again = nlohmann::json::parse(text.data(), text.data() + text.size(), cb);
    (void)again;
    if (!dup.empty()) io::fail(path, "index names tensor '" + dup + "' twice");
  }
  std::map<std::string, std::string> shard_of;
  for (const auto& [name, file] : wm.items()) {
    if (!file.is_string()) io::fail(path, "weight_map entry '" + name + "' is not a file name");
    const std::string s = file.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      io::fail(path, "weight_map entry '" + name + "' names '" + s + "', not a file beside the index");
    shard_of[name] = s;
  }
  const fs::path dir = fs::path(path).parent_path();
  std::map<std::string, std::map<std::string, HostTensor>> shards;
  for (const auto& [name, file] : shard_of)
    if (!shards.count(file)) shards[file] = io::load_safetensors_file((dir / file).string());
  std::map<std::string, HostTensor> out;
  for (auto& [file, tensors] : shards) {
    for (auto& [name, t] : tensors) {
      auto it = shard_of.find(name);
      if (it == shard_of.end())
        io::fail(path, "shard '" + file + "' holds tensor '" + name + "', which the index does not list");
      if (it->second != file)
        io::fail(path, "tensor '" + name + "' is in shard '" + file + "', but the index says '" + it->second + "'");
      out.emplace(name, std::move(t));
    }
  }
  for (const auto& [name, file] : shard_of)
    if (!out.count(name)) io::fail(path, "tensor '" + name + "' is not in its shard '" + file + "'");
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::map<std::string, HostTensor> load_safetensors(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "model.safetensors.index.json", ec))
      return load_index((dir / "model.safetensors.index.json").string());
    if (fs::exists(dir / "model.safetensors", ec)) return io::load_safetensors_file((dir / "model.safetensors").string());
    io::fail(path, "folder holds neither model.safetensors nor model.safetensors.index.json");
  }
  if (ends_with(path, ".index.json")) return load_index(path);
  return io::load_safetensors_file(path);
}

}  // namespace luminal
