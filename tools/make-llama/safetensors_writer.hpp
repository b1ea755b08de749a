// A streaming safetensors writer: the header is fixed from the tensors' names, dtypes and
// shapes up front, then each tensor's bytes are appended in that order. Used by
// tools/make-llama (and tests) to write checkpoints in the Hugging Face layout.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace st_writer {

struct TensorInfo {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I32", "BOOL"
  std::vector<int64_t> shape;
  uint64_t nbytes() const {
    uint64_t n = dtype == "F32" || dtype == "I32" ? 4 : dtype == "BOOL" ? 1 : 2;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

class Writer {
 public:
  /// Opens `path` and writes the header for `tensors` (written in this order).
  Writer(const std::string& path, const std::vector<TensorInfo>& tensors,
         const std::map<std::string, std::string>& metadata = {})
      : path_(path), tensors_(tensors) {
    nlohmann::ordered_json h;
    if (!metadata.empty()) h["__metadata__"] = metadata;
    uint64_t off = 0;
    for (const TensorInfo& t : tensors_) {
      h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.nbytes()}}};
      off += t.nbytes();
    }
    std::string text = h.dump();
    while (text.size() % 8) text += ' ';  // data starts 8-byte aligned
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw std::runtime_error("[make-llama] cannot write '" + path + "'");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff);
    put(len, 8);
    put(text.data(), text.size());
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    if (f_) std::fclose(f_);
  }

  /// Appends bytes of the current tensor (any number of calls per tensor, in order).
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw std::runtime_error("[make-llama] write to '" + path_ + "' failed");
  }
  void close() {
    if (f_ && std::fclose(f_) != 0) throw std::runtime_error("[make-llama] closing '" + path_ + "' failed");
    f_ = nullptr;
  }

 private:
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::FILE* f_ = nullptr;
};

}  // namespace st_writer
