// Target: construction, parsing, printing and availability.
#include "luminal/target.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

#include "luminal/error.hpp"
#include "runtime/device_probe.hpp"

namespace luminal {

namespace {

// Architectures the backends know how to generate code for; anything else is rejected
// here, before a JIT is ever called.
constexpr std::array<std::string_view, 4> kCpuArchs{"generic", "avx2", "avx512", "neon"};
constexpr std::array<std::string_view, 17> kCudaArchs{
    "sm_50", "sm_52", "sm_60", "sm_61",  "sm_70",  "sm_72",   "sm_75",  "sm_80",  "sm_86",
    "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_120", "sm_120a"};
constexpr std::array<std::string_view, 12> kHipArchs{"gfx900",  "gfx906",  "gfx908",  "gfx90a",
                                                     "gfx940",  "gfx941",  "gfx942",  "gfx1030",
                                                     "gfx1100", "gfx1101", "gfx1102", "gfx1201"};

template <size_t N>
std::string list(const std::array<std::string_view, N>& a) {
  std::string s;
  for (std::string_view x : a) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

template <size_t N>
void check_arch(std::string_view kind, std::string_view arch, const std::array<std::string_view, N>& known) {
  if (std::find(known.begin(), known.end(), arch) != known.end()) return;
  throw CompileError("[target] unknown " + std::string(kind) + " architecture '" + std::string(arch) +
                     "'; known: " + list(known));
}

std::string_view kind_name(Target::Kind k) {
  switch (k) {
    case Target::Kind::reference:
      return "reference";
    case Target::Kind::cpu:
      return "cpu";
    case Target::Kind::cuda:
      return "cuda";
    case Target::Kind::hip:
      return "hip";
  }
  return "?";
}

}  // namespace

Target Target::reference() { return Target(Kind::reference, 0, ""); }
Target Target::cpu() { return Target(Kind::cpu, 0, ""); }
Target Target::cuda(int device) {
  if (device < 0) throw CompileError("[target] CUDA device index " + std::to_string(device) + " is negative");
  return Target(Kind::cuda, device, "");
}
Target Target::hip(int device) {
  if (device < 0) throw CompileError("[target] HIP device index " + std::to_string(device) + " is negative");
  return Target(Kind::hip, device, "");
}

Target Target::best() {
  // A GPU only where this build generates code for it: a GPU target without its code
  // generator runs kernels on the host interpreter, far slower than the CPU backend.
  if (detail::has_cuda_codegen() && detail::cuda_device_count() > 0) return cuda(0);
  if (detail::has_hip_codegen() && detail::hip_device_count() > 0) return hip(0);
  return cpu();
}

Target Target::with_arch(std::string_view arch) const {
  switch (kind_) {
    case Kind::reference:
      if (!arch.empty())
        throw CompileError("[target] the reference target takes no architecture, got '" + std::string(arch) +
                           "'");
      break;
    case Kind::cpu:
      if (!arch.empty()) check_arch("cpu", arch, kCpuArchs);
      break;
    case Kind::cuda:
      if (!arch.empty()) check_arch("cuda", arch, kCudaArchs);
      break;
    case Kind::hip:
      if (!arch.empty()) check_arch("hip", arch, kHipArchs);
      break;
  }
  Target t(kind_, device_, std::string(arch));
  t.emulated_ = emulated_;
  return t;
}

Target Target::emulated() const {
  if (kind_ != Kind::cuda && kind_ != Kind::hip)
    throw CompileError("[target] only GPU targets have an emulated form; " + to_string() +
                       " runs on the host already");
  Target t = *this;
  t.emulated_ = true;
  return t;
}

Target Target::parse(std::string_view text) {
  // kind[:device][:arch][+emu]
  constexpr std::string_view kEmu = "+emu";
  if (text.size() > kEmu.size() && text.substr(text.size() - kEmu.size()) == kEmu) {
    const Target base = parse(text.substr(0, text.size() - kEmu.size()));
    if (base.emulated_) throw CompileError("[target] '" + std::string(text) + "': +emu given twice");
    if (base.kind_ != Kind::cuda && base.kind_ != Kind::hip)
      throw CompileError("[target] '" + std::string(text) + "': only cuda and hip targets have an emulated (+emu) form");
    return base.emulated();
  }
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    const size_t c = text.find(':', pos);
    parts.push_back(text.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  const std::string_view kind = parts[0];
  Target t = reference();
  if (kind == "reference")
    t = reference();
  else if (kind == "cpu")
    t = cpu();
  else if (kind == "cuda")
    t = cuda(0);
  else if (kind == "hip")
    t = hip(0);
  else
    throw CompileError("[target] unknown target '" + std::string(text) +
                       "'; expected reference, cpu[:arch], cuda[:device][:sm_XX] or hip[:device][:gfxXXX]");
  size_t i = 1;
  if (i < parts.size() && (t.kind_ == Kind::cuda || t.kind_ == Kind::hip) && !parts[i].empty() &&
      std::all_of(parts[i].begin(), parts[i].end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    int dev = 0;
    auto r = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), dev);
    if (r.ec != std::errc()) throw CompileError("[target] bad device index in '" + std::string(text) + "'");
    t.device_ = dev;
    ++i;
  }
  if (i < parts.size()) {
    if (parts[i].empty()) throw CompileError("[target] empty architecture in '" + std::string(text) + "'");
    t = t.with_arch(parts[i]);
    ++i;
  }
  if (i < parts.size()) throw CompileError("[target] trailing text in '" + std::string(text) + "'");
  return t;
}

std::string Target::to_string() const {
  std::string s(kind_name(kind_));
  if (device_ != 0) {
    s += ':';
    s += std::to_string(device_);
  }
  if (!arch_.empty()) {
    s += ':';
    s += arch_;
  }
  if (emulated_) s += "+emu";
  return s;
}

bool Target::is_available() const { return unavailable_reason().empty(); }

std::string Target::unavailable_reason() const {
  if (emulated_) return "";
  switch (kind_) {
    case Kind::reference:
    case Kind::cpu:
      return "";
    case Kind::cuda:
    case Kind::hip: {
      const bool cuda = kind_ == Kind::cuda;
      const detail::DeviceProbe& p = cuda ? detail::cuda_probe() : detail::hip_probe();
      if (!p.error.empty()) return p.error;
      if (p.count <= device_)
        return std::string(cuda ? "no CUDA device " : "no HIP device ") + std::to_string(device_) + " (" +
               std::to_string(p.count) + " found)";
      if (!(cuda ? detail::has_cuda_codegen() : detail::has_hip_codegen()))
        return std::string("this build of Luminal has no ") + (cuda ? "CUDA" : "HIP") +
               " runtime; use the emulated target (" + emulated().to_string() + ") or compile_only";
      return "";
    }
  }
  return "unknown target kind";
}

}  // namespace luminal
