// The safetensors reader behind luminal::load_safetensors (include/luminal/safetensors.hpp).
//
// Format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object:
// tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
// "__metadata__" object of strings), then the data; offsets are relative to the first
// byte after the header.
//
// parse_safetensors works on bytes already in memory so that a fuzzer can drive it
// directly; load_safetensors maps the file and calls it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "luminal/host_tensor.hpp"

namespace luminal::io {

/// Header lengths above this are rejected before anything is allocated (the same bound
/// as the format's reference implementation).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// Every tensor of the safetensors file whose whole content is `bytes`. Views point into
/// `bytes` and hold `owner`, which must keep those bytes alive. `what` names the file in
/// error messages. Throws RuntimeError on any malformed input; never reads outside `bytes`.
std::map<std::string, HostTensor> parse_safetensors(std::span<const std::byte> bytes, const std::string& what,
                                                    std::shared_ptr<const void> owner);

/// Maps `path` read-only and parses it (one file, not an index or a folder).
std::map<std::string, HostTensor> load_safetensors_file(const std::string& path);

}  // namespace luminal::io
