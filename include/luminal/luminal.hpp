// Luminal: everything a user needs, one include.
#pragma once

#include "luminal/callable.hpp"
#include "luminal/communicator.hpp"
#include "luminal/compile.hpp"
#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/error.hpp"
#include "luminal/graph.hpp"
#include "luminal/host_tensor.hpp"
#include "luminal/ops.hpp"
#include "luminal/safetensors.hpp"
#include "luminal/serving.hpp"
#include "luminal/target.hpp"
#include "luminal/tensor.hpp"
