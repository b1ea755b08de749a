// Where a compiled program runs. A value type that round-trips through a string:
// "reference", "cpu", "cpu:avx512", "cuda", "cuda:sm_90", "cuda:1:sm_90", "hip:gfx90a",
// and the emulated GPU targets "cuda:sm_90+emu", "hip:gfx90a+emu".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace luminal {

class Target {
 public:
  enum class Kind : uint8_t { reference, cpu, cuda, hip };

  /// The interpreter: the semantics, slow but obviously correct.
  static Target reference();
  static Target cpu();
  static Target cuda(int device = 0);
  static Target hip(int device = 0);
  /// The fastest target this build generates code for and this machine has: CUDA
  /// device 0, else HIP device 0, else the CPU (the CPU in this build, which has no GPU
  /// code generator yet).
  static Target best();
  /// Parses the forms above; an unknown kind or architecture throws CompileError.
  static Target parse(std::string_view text);

  std::string to_string() const;
  /// Whether this target can run here (reference, cpu and emulated GPU targets always; a
  /// GPU needs a driver that loads and the device).
  bool is_available() const;
  /// Why is_available() is false ("libcuda.so.1 not found: ...", "no CUDA device 1 (0
  /// found)"); empty when it is available.
  std::string unavailable_reason() const;

  /// The same GPU target whose generated kernels run on the host emulator: the kernel
  /// source NVRTC/hipRTC compile, compiled for the host against an emulation header.
  /// Available on every machine. Throws CompileError for reference and cpu.
  Target emulated() const;
  bool is_emulated() const { return emulated_; }

  Kind kind() const { return kind_; }
  int device() const { return device_; }
  /// "" (the default: detected or generic), "avx2", "avx512", "sm_90", "gfx90a", ...
  const std::string& arch() const { return arch_; }
  /// The same target with an explicit architecture (checked like parse()).
  Target with_arch(std::string_view arch) const;

  bool operator==(const Target&) const = default;

 private:
  Target(Kind kind, int device, std::string arch) : kind_(kind), device_(device), arch_(std::move(arch)) {}
  Kind kind_ = Kind::reference;
  int device_ = 0;
  std::string arch_;
  bool emulated_ = false;
};

}  // namespace luminal
