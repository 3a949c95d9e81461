#pragma once
/// Umbrella header of pact/core.
#include "pact/core/accounting.hpp"
#include "pact/core/bench_report.hpp"
#include "pact/core/dtype.hpp"
#include "pact/core/error.hpp"
#include "pact/core/group.hpp"
#include "pact/core/json.hpp"
#include "pact/core/layout.hpp"
#include "pact/core/provider.hpp"
#include "pact/core/storage.hpp"
#include "pact/core/tensor.hpp"
#include "pact/core/typed.hpp"
