#include "backends/hip/code_object.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>

namespace luminal::hip {

namespace {

constexpr uint32_t kSectionNote = 7;          // SHT_NOTE
constexpr uint32_t kNoteAmdgpuMetadata = 32;  // NT_AMDGPU_METADATA
constexpr int kMaxDepth = 16;                 // the metadata nests 4 deep

template <class T>
std::optional<T> read_le(std::string_view s, size_t at) {
  if (at > s.size() || s.size() - at < sizeof(T)) return std::nullopt;
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));  // x86-64 and the ELF are both little-endian
  return v;
}

// The part of MessagePack the metadata uses, as a small tree: maps with string keys,
// arrays, strings, integers, booleans; anything else is skipped.
struct Value {
  enum class Kind { Nil, Int, Str, Array, Map, Other } kind = Kind::Nil;
  int64_t i = 0;
  std::string s;
  std::vector<Value> items;              // Array
  std::map<std::string, Value> entries;  // Map (string keys only)
};

class MsgPack {
 public:
  explicit MsgPack(std::string_view d) : d_(d) {}
  bool value(Value& out, int depth = 0) {
    if (depth > kMaxDepth || pos_ >= d_.size()) return false;
    const uint8_t b = static_cast<uint8_t>(d_[pos_++]);
    if (b <= 0x7f) return integer(out, b);
    if (b >= 0xe0) return integer(out, static_cast<int8_t>(b));
    if ((b & 0xf0) == 0x80) return map(out, b & 0x0f, depth);
    if ((b & 0xf0) == 0x90) return array(out, b & 0x0f, depth);
    if ((b & 0xe0) == 0xa0) return str(out, b & 0x1f);
    uint64_t n = 0;
    switch (b) {
      case 0xc0: out.kind = Value::Kind::Nil; return true;
      case 0xc2: case 0xc3: return integer(out, b == 0xc3);
      case 0xcc: return uint(1, n) && integer(out, static_cast<int64_t>(n));
      case 0xcd: return uint(2, n) && integer(out, static_cast<int64_t>(n));
      case 0xce: return uint(4, n) && integer(out, static_cast<int64_t>(n));
      case 0xcf: return uint(8, n) && integer(out, static_cast<int64_t>(n));
      case 0xd0: return uint(1, n) && integer(out, static_cast<int8_t>(n));
      case 0xd1: return uint(2, n) && integer(out, static_cast<int16_t>(n));
      case 0xd2: return uint(4, n) && integer(out, static_cast<int32_t>(n));
      case 0xd3: return uint(8, n) && integer(out, static_cast<int64_t>(n));
      case 0xca: return skip(4, out);
      case 0xcb: return skip(8, out);
      case 0xd9: return uint(1, n) && str(out, n);
      case 0xda: return uint(2, n) && str(out, n);
      case 0xdb: return uint(4, n) && str(out, n);
      case 0xc4: return uint(1, n) && skip(n, out);
      case 0xc5: return uint(2, n) && skip(n, out);
      case 0xc6: return uint(4, n) && skip(n, out);
      case 0xd4: return skip(2, out);
      case 0xd5: return skip(3, out);
      case 0xd6: return skip(5, out);
      case 0xd7: return skip(9, out);
      case 0xd8: return skip(17, out);
      case 0xc7: return uint(1, n) && skip(n + 1, out);
      case 0xc8: return uint(2, n) && skip(n + 1, out);
      case 0xc9: return uint(4, n) && skip(n + 1, out);
      case 0xdc: return uint(2, n) && array(out, n, depth);
      case 0xdd: return uint(4, n) && array(out, n, depth);
      case 0xde: return uint(2, n) && map(out, n, depth);
      case 0xdf: return uint(4, n) && map(out, n, depth);
      default: return false;  // 0xc1 is never used
    }
  }

 private:
  bool uint(size_t bytes, uint64_t& n) {  // big-endian, as MessagePack stores lengths and ints
    if (d_.size() - pos_ < bytes) return false;
    n = 0;
    for (size_t k = 0; k < bytes; ++k) n = n << 8 | static_cast<uint8_t>(d_[pos_++]);
    return true;
  }
  static bool integer(Value& out, int64_t v) {
    out.kind = Value::Kind::Int;
    out.i = v;
    return true;
  }
  bool str(Value& out, uint64_t n) {
    if (d_.size() - pos_ < n) return false;
    out.kind = Value::Kind::Str;
    out.s.assign(d_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(uint64_t n, Value& out) {
    if (d_.size() - pos_ < n) return false;
    pos_ += n;
    out.kind = Value::Kind::Other;
    return true;
  }
  bool array(Value& out, uint64_t n, int depth) {
    if (n > d_.size() - pos_) return false;  // each item takes at least one byte
    out.kind = Value::Kind::Array;
    out.items.resize(n);
    for (auto& v : out.items)
      if (!value(v, depth + 1)) return false;
    return true;
  }
  bool map(Value& out, uint64_t n, int depth) {
    if (n > (d_.size() - pos_) / 2) return false;
    out.kind = Value::Kind::Map;
    for (uint64_t k = 0; k < n; ++k) {
      Value key, v;
      if (!value(key, depth + 1) || !value(v, depth + 1)) return false;
      if (key.kind == Value::Kind::Str) out.entries[key.s] = std::move(v);
    }
    return true;
  }
  std::string_view d_;
  size_t pos_ = 0;
};

int64_t int_at(const Value& m, const char* key) {
  auto it = m.entries.find(key);
  return it != m.entries.end() && it->second.kind == Value::Kind::Int ? it->second.i : 0;
}

// The descriptor of the AMDGPU metadata note, if the ELF has one.
std::optional<std::string_view> metadata_note(std::string_view elf) {
  if (elf.size() < 64 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 /* 64-bit */ || elf[5] != 1 /* LE */)
    return std::nullopt;
  const auto shoff = read_le<uint64_t>(elf, 0x28);
  const auto shentsize = read_le<uint16_t>(elf, 0x3a), shnum = read_le<uint16_t>(elf, 0x3c);
  if (!shoff || !shentsize || !shnum || *shentsize < 64) return std::nullopt;
  for (uint32_t i = 0; i < *shnum; ++i) {
    if (*shoff > elf.size()) return std::nullopt;
    const size_t sh = static_cast<size_t>(*shoff) + size_t{i} * *shentsize;
    const auto type = read_le<uint32_t>(elf, sh + 4);
    const auto off = read_le<uint64_t>(elf, sh + 0x18), size = read_le<uint64_t>(elf, sh + 0x20);
    if (!type || !off || !size) return std::nullopt;
    if (*type != kSectionNote || *off > elf.size() || *size > elf.size() - *off) continue;
    const std::string_view notes = elf.substr(static_cast<size_t>(*off), static_cast<size_t>(*size));
    for (size_t at = 0; at + 12 <= notes.size();) {
      const uint32_t namesz = *read_le<uint32_t>(notes, at), descsz = *read_le<uint32_t>(notes, at + 4),
                     ntype = *read_le<uint32_t>(notes, at + 8);
      const uint64_t name_at = at + 12, desc_at = name_at + (uint64_t{namesz} + 3) / 4 * 4;
      const uint64_t next = desc_at + (uint64_t{descsz} + 3) / 4 * 4;
      if (desc_at + descsz > notes.size()) break;
      const std::string_view name = notes.substr(static_cast<size_t>(name_at), namesz);
      if (ntype == kNoteAmdgpuMetadata && name.substr(0, 6) == "AMDGPU")
        return notes.substr(static_cast<size_t>(desc_at), descsz);
      at = static_cast<size_t>(next);
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<KernelResources> code_object_resources(std::string_view elf) {
  std::vector<KernelResources> out;
  const auto note = metadata_note(elf);
  if (!note) return out;
  Value root;
  if (!MsgPack(*note).value(root) || root.kind != Value::Kind::Map) return out;
  auto kernels = root.entries.find("amdhsa.kernels");
  if (kernels == root.entries.end() || kernels->second.kind != Value::Kind::Array) return out;
  for (const Value& k : kernels->second.items) {
    if (k.kind != Value::Kind::Map) continue;
    auto name = k.entries.find(".name");
    if (name == k.entries.end() || name->second.kind != Value::Kind::Str) continue;
    KernelResources r;
    r.name = name->second.s;
    r.registers = static_cast<int>(int_at(k, ".vgpr_count"));
    r.shared_bytes = static_cast<int>(int_at(k, ".group_segment_fixed_size"));
    r.stack_bytes = static_cast<int>(int_at(k, ".private_segment_fixed_size"));
    r.spill_bytes = static_cast<int>(4 * int_at(k, ".vgpr_spill_count"));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace luminal::hip
