// NVRTC through dlopen: libnvrtc.so.13, .12 or .11.2 (whichever loads first), never
// linked, so libluminal starts on machines without CUDA. One program per call compiles
// every kernel of a graph (one NVRTC run per graph keeps CI time sane).
//
// Options: -arch=sm_XX (CUBIN) or compute_XX (PTX, for a driver newer than this NVRTC),
// -std=c++17, --fmad=false (a*b+c is never silently fused: the emulator computes the
// same bits), and -Xptxas=-v, whose report -- registers, shared memory, spills per
// kernel -- is parsed into KernelResources.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "luminal/callable.hpp"

namespace luminal::cuda {

struct NvrtcOutput {
  std::string image;  ///< CUBIN (ELF) or PTX text
  bool cubin = true;
  std::string log;    ///< NVRTC's program log (ptxas -v lines included)
  std::vector<KernelResources> resources;  ///< parsed from the log, one per kernel entry
};

class Nvrtc {
 public:
  /// The process-wide NVRTC, or null with `why` set ("libnvrtc.so.13/.12/.11.2 not found").
  static const Nvrtc* get(std::string* why = nullptr);

  int major() const { return major_; }
  int minor() const { return minor_; }
  /// "13.0"
  std::string version() const;
  /// The options every compile passes beside -arch.
  static std::string options_string();
  /// Whether NVRTC can generate code for "sm_90" (nvrtcGetSupportedArchs).
  bool supports(const std::string& arch) const;
  std::string supported_list() const;

  /// Compiles `source` for `arch`. Throws CompileError with NVRTC's log on failure.
  NvrtcOutput compile(const std::string& source, const std::string& arch, bool cubin,
                      const std::string& program_name = "luminal.cu") const;

  struct Api;

 private:
  Nvrtc() = default;
  std::shared_ptr<const Api> api_;
  int major_ = 0, minor_ = 0;
  std::vector<int> archs_;
};

/// Parses `ptxas info` lines of a -Xptxas=-v log into per-kernel resources.
std::vector<KernelResources> parse_ptxas_log(const std::string& log);

}  // namespace luminal::cuda
