// A rank stores only its shard of each split weight (docs/distributed.md, "Binding only a
// shard"): the CPU backend stores a param its program reads only a block of as that block
// (kernel::Program::blocks) and its kernels index the block. Checked here with ranks as
// threads (Communicator::local_group): outputs bit-identical to the same plan storing the
// weights whole, the memory a rank holds and has resident for them 1/P of the whole
// (mincore), whole bindings copied to the block, bad bindings refused clearly, and
// bind_safetensors copying only the block from the file.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <thread>

#include "backends/cpu/cpu_executable.hpp"
#include "compiler/translation_models.hpp"
#include "dist/on_ranks.hpp"
#include "luminal/luminal.hpp"
#include "runtime/executable.hpp"
#include "support/temp_dir.hpp"

using namespace luminal;

namespace {

// Same dtype, shape and bytes.
bool same_tensor(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// A safetensors file of f32 tensors (8-byte header length, JSON header, data).
void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& ts) {
  std::string header = "{";
  std::size_t at = 0;
  for (const auto& [name, t] : ts) {
    std::string shape;
    for (int64_t d : t.shape()) {
      if (!shape.empty()) shape += ',';
      shape += std::to_string(d);
    }
    if (header.size() > 1) header += ',';
    header += '"';
    header += name;
    header += "\":{\"dtype\":\"F32\",\"shape\":[";
    header += shape;
    header += "],\"data_offsets\":[";
    header += std::to_string(at);
    header += ',';
    header += std::to_string(at + t.nbytes());
    header += "]}";
    at += t.nbytes();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  const uint64_t n = header.size();
  std::fwrite(&n, 8, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  for (const auto& [name, t] : ts) std::fwrite(t.data(), 1, t.nbytes(), f);
  std::fclose(f);
}

// The d 512 block model, its random inputs and weights, and the weights written to a
// safetensors file in a fresh folder (removed with it when the test ends).
struct ModelFile {
  Graph g;
  std::map<std::string, HostTensor> data;
  testsupport::TempDir dir{"dist-shard"};
  std::string path;
  explicit ModelFile(uint64_t seed) {
    test::build_model(g, test::BlockConfig{4, 512, 8, 4, 1536}, 1);
    data = test::random_inputs(*g.impl(), seed);
    std::map<std::string, HostTensor> params;
    for (uint32_t id : g.impl()->params)
      params.emplace(g.impl()->nodes[id].name, data.at(g.impl()->nodes[id].name));
    path = (dir.path / "model.safetensors").string();
    write_safetensors(path, params);
  }
};

// Pages of [p, p + bytes) in memory now (mincore).
std::size_t resident_pages(const void* p, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::size_t n = (reinterpret_cast<std::uintptr_t>(p) + bytes - begin + page - 1) / page;
  std::vector<unsigned char> v(n);
  REQUIRE(::mincore(reinterpret_cast<void*>(begin), n * page, v.data()) == 0);
  std::size_t r = 0;
  for (unsigned char c : v) r += c & 1;
  return r;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Callable compile_rank(const Graph& g, const std::shared_ptr<Communicator>& comm) {
  CompileOptions o;
  o.communicator = comm;
  o.time_budget_seconds = 600;  // every rank must extract the same plan
  return compile(g, Target::cpu(), o);
}

}  // namespace

TEST_CASE("a rank stores only its block of each split weight; outputs bit-identical to whole storage",
          "[dist]") {
  Graph g;
  test::build_model(g, test::BlockConfig{4, 512, 8, 4, 1536}, 1);
  const auto data = test::random_inputs(*g.impl(), 31);
  for (int P : {2, 4}) {
    INFO("ranks " << P);
    std::vector<int64_t> whole_split(static_cast<size_t>(P)), held(static_cast<size_t>(P)),
        resident(static_cast<size_t>(P));
    std::vector<int> blocks(static_cast<size_t>(P));
    const auto errors = test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string& err) {
      const auto i = static_cast<size_t>(r);
      Callable fn = compile_rank(g, comm);
      std::map<std::string, HostTensor> inputs;
      for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
      for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));  // whole: the block is copied
      const auto& st = *fn.state();
      blocks[i] = static_cast<int>(st.param_blocks.size());
      const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
      for (const auto& [name, reg] : st.param_blocks) {
        const HostTensor& bound = *st.params.at(name);
        std::vector<int64_t> bd;
        for (size_t a = 0; a < reg.start.size(); ++a) bd.push_back(reg.end[a] - reg.start[a]);
        if (bound.shape() != bd) err += name + ": bound tensor is not the block; ";
        whole_split[i] += static_cast<int64_t>(data.at(name).nbytes());
        held[i] += static_cast<int64_t>(bound.nbytes());
        resident[i] += static_cast<int64_t>(resident_pages(bound.data(), bound.nbytes())) * page;
        // Its bytes: the whole weight's elements inside the block (2-D [out, in] weights).
        if (bd.size() == 2) {
          const auto* b = reinterpret_cast<const float*>(bound.data());
          const auto* w = reinterpret_cast<const float*>(data.at(name).data());
          const int64_t in = data.at(name).shape()[1];
          for (int64_t y = 0; y < bd[0]; ++y)
            if (std::memcmp(b + y * bd[1], w + (reg.start[0] + y) * in + reg.start[1],
                            static_cast<size_t>(bd[1]) * 4)) {
              err += name + ": block row " + std::to_string(y) + " differs; ";
              break;
            }
        }
      }
      const auto out = fn(inputs);
      // The same plan storing every weight whole (the program before compact shards): the
      // kernels differ only in how they index the weights, so the bits must not change.
      const auto* exe = dynamic_cast<const cpu::CpuExecutable*>(st.exe.get());
      if (!exe) throw std::runtime_error("not a CPU executable");
      cpu::CpuBuildOptions bo;
      bo.communicator = comm;
      const cpu::CpuExecutable whole(exe->plan(), st.graph, bo);
      if (!whole.info().param_blocks.empty()) err += "the whole-storage program stores blocks; ";
      // Only the indexing differs: the same kernels, the weights still read by the GEMMs.
      auto count = [](const std::string& src, const std::string& what) {
        int n = 0;
        for (size_t at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
        return n;
      };
      if (whole.info().generated_kernels != exe->info().generated_kernels ||
          count(whole.c_source(), "lm_gemm_blocks(") != count(exe->c_source(), "lm_gemm_blocks(") ||
          count(exe->c_source(), "lm_gemm_blocks(") == 0)
        err += "the kernels differ from whole storage's; ";
      std::map<std::string, const HostTensor*> tensors;
      for (const auto& [name, t] : inputs) tensors[name] = &t;
      for (const auto& name : fn.param_names()) tensors[name] = &data.at(name);
      const auto ref = whole.run(DimBindings{}, tensors);
      if (!same_tensor(out.at("y"), ref.at("y"))) err += "outputs differ from whole storage; ";
      // run() given whole weights (translation validation calls it so) copies the blocks.
      const auto again = exe->run(DimBindings{}, tensors);
      if (!same_tensor(out.at("y"), again.at("y"))) err += "run() with whole weights differs; ";
    });
    for (int r = 0; r < P; ++r) {
      const auto i = static_cast<size_t>(r);
      INFO("rank " << r << ": " << errors[i]);
      CHECK(errors[i].empty());
      // q, k, v, gate, up by columns, o and down by rows: 7 weights, each 1/P resident.
      CHECK(blocks[i] == 7);
      CHECK(held[i] * P == whole_split[i]);
      CHECK(resident[i] <= held[i] + 7 * 2 * static_cast<int64_t>(::sysconf(_SC_PAGESIZE)));
      CHECK(resident[i] >= held[i]);
    }
  }
}

TEST_CASE("binding a split weight: the block or the whole weight, anything else a clear error", "[dist]") {
  Graph g;
  test::build_model(g, test::BlockConfig{4, 512, 8, 4, 1536}, 1);
  const auto data = test::random_inputs(*g.impl(), 32);
  const int P = 2;
  std::vector<std::string> msgs(P);
  const auto errors = test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string& err) {
    Callable fn = compile_rank(g, comm);
    std::map<std::string, HostTensor> inputs;
    for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
    // The row split of o_proj ([out, in] = [512, 512]): this rank's columns.
    const std::string name = "l0.wo";
    const ParamRegion reg = fn.param_region(name);
    const std::vector<int64_t> bd{reg.end[0] - reg.start[0], reg.end[1] - reg.start[1]};
    if (numel(bd) * P != numel(data.at(name).shape()))
      err += "o_proj is not split in " + std::to_string(P) + "; ";
    try {  // the block transposed: refused, naming the block
      fn.bind(name, HostTensor::from(std::vector<float>(static_cast<size_t>(numel(bd))), {bd[1], bd[0]}));
      err += "a transposed block was accepted; ";
    } catch (const RuntimeError& e) {
      msgs[static_cast<size_t>(r)] = e.what();
    }
    try {
      fn.bind(name, HostTensor::from(std::vector<float>(7), {7}));
      err += "a rank-1 tensor was accepted; ";
    } catch (const RuntimeError&) {
    }
    // The block itself, and every other weight whole: the same output as all whole.
    for (const auto& n : fn.param_names()) fn.bind(n, data.at(n));
    const auto want = fn(inputs);
    const HostTensor& w = data.at(name);
    std::vector<float> block;
    const auto* src = reinterpret_cast<const float*>(w.data());
    for (int64_t y = reg.start[0]; y < reg.end[0]; ++y)
      for (int64_t x = reg.start[1]; x < reg.end[1]; ++x) block.push_back(src[y * w.shape()[1] + x]);
    fn.bind(name, HostTensor::from(block, bd));
    if (!same_tensor(fn(inputs).at("y"), want.at("y"))) err += "binding the block changes the output; ";
    // A call validates what is bound: the block shape passes, and the param is
    // reported with the block's shape.
    try {
      fn.bind({{name, HostTensor::from(std::vector<float>(4), {2, 2})}});
      err += "a map bind of a wrong shape was accepted; ";
    } catch (const RuntimeError&) {
    }
    if (!same_tensor(fn(inputs).at("y"), want.at("y"))) err += "a refused bind changed the weights; ";
    try {  // a rank's program is not saved
      fn.save("/tmp/luminal-dist-save-" + std::to_string(::getpid()) + "-" + std::to_string(r));
      err += "save() of a rank's program was accepted; ";
    } catch (const RuntimeError& e) {
      if (std::string(e.what()).find("weight shards") == std::string::npos)
        err += std::string("save: ") + e.what();
    }
  });
  for (int r = 0; r < P; ++r) {
    const auto i = static_cast<size_t>(r);
    INFO("rank " << r << ": " << errors[i]);
    CHECK(errors[i].empty());
    INFO(msgs[i]);
    CHECK(msgs[i].find("[bind] param 'l0.wo' has shape (256, 512)") != std::string::npos);
    CHECK(msgs[i].find("this rank stores only its block (512, 256) -- elements [0:512, " +
                       std::string(r == 0 ? "0:256" : "256:512") + "] of (512, 512)") != std::string::npos);
  }
}

TEST_CASE("bind_safetensors copies only each split weight's block from the file; outputs unchanged",
          "[dist]") {
  const ModelFile m(21);
  const Graph& g = m.g;
  const auto& data = m.data;
  const std::string& path = m.path;
  const int P = 2;
  std::vector<int> split(P, 0);
  const auto errors = test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string& err) {
    Callable fn = compile_rank(g, comm);
    std::map<std::string, HostTensor> inputs;
    for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
    for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
    const auto full = fn(inputs);
    bind_safetensors(fn, path);
    const auto shard = fn(inputs);
    if (!same_tensor(full.at("y"), shard.at("y"))) err += "outputs differ; ";
    const auto& st = *fn.state();
    for (const auto& name : fn.param_names()) {
      const ParamRegion reg = fn.param_region(name);
      const HostTensor& bound = *st.params.at(name);
      const HostTensor& want = data.at(name);
      if (reg.end == want.shape() && reg.start == std::vector<int64_t>(reg.start.size(), 0)) {
        if (bound.shape() != want.shape() || std::memcmp(bound.data(), want.data(), want.nbytes()))
          err += name + ": whole weight differs; ";
        continue;
      }
      ++split[static_cast<size_t>(r)];
      if (!st.param_blocks.count(name)) err += name + ": not stored as its block; ";
      const std::vector<int64_t> bd{reg.end[0] - reg.start[0], reg.end[1] - reg.start[1]};
      if (bound.shape() != bd) {
        err += name + ": bound shape is not the block's; ";
        continue;
      }
      const auto* b = reinterpret_cast<const float*>(bound.data());
      const auto* w = reinterpret_cast<const float*>(want.data());
      for (int64_t y = 0; y < bd[0]; ++y)
        if (std::memcmp(b + y * bd[1], w + (reg.start[0] + y) * want.shape()[1] + reg.start[1],
                        static_cast<size_t>(bd[1]) * 4)) {
          err += name + " differs in block row " + std::to_string(y) + "; ";
          break;
        }
    }
  });
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r << ": " << errors[static_cast<size_t>(r)]);
    CHECK(errors[static_cast<size_t>(r)].empty());
    CHECK(split[static_cast<size_t>(r)] == 7);
  }
}

TEST_CASE("the reference target indexes whole weights: bind_safetensors reserves the full shape", "[dist]") {
  const ModelFile m(22);
  const Graph& g = m.g;
  const auto& data = m.data;
  const std::string& path = m.path;
  const int P = 2;
  std::vector<int> split(P, 0);
  const auto errors = test::on_ranks(P, [&](int r, const std::shared_ptr<Communicator>& comm, std::string& err) {
    CompileOptions o;
    o.communicator = comm;
    o.time_budget_seconds = 600;
    Callable fn = compile(g, Target::reference(), o);
    std::map<std::string, HostTensor> inputs;
    for (const auto& name : fn.input_names()) inputs.emplace(name, data.at(name));
    for (const auto& name : fn.param_names()) fn.bind(name, data.at(name));
    const auto full = fn(inputs);
    bind_safetensors(fn, path);
    if (!same_tensor(full.at("y"), fn(inputs).at("y"))) err += "outputs differ; ";
    if (!fn.state()->param_blocks.empty()) err += "the interpreter's program stores blocks; ";
    for (const auto& name : fn.param_names()) {
      const ParamRegion reg = fn.param_region(name);
      const HostTensor& bound = *fn.state()->params.at(name);
      if (bound.shape() != data.at(name).shape()) err += name + ": not the whole shape; ";
      if (!(reg.end == data.at(name).shape() && reg.start == std::vector<int64_t>(reg.start.size(), 0)))
        ++split[static_cast<size_t>(r)];
    }
  });
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r << ": " << errors[static_cast<size_t>(r)]);
    CHECK(errors[static_cast<size_t>(r)].empty());
    CHECK(split[static_cast<size_t>(r)] == 7);
  }
}
