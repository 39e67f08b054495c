#include "kc/common/registry.hpp"

#include <algorithm>
#include <regex>

namespace kc {

std::string KernelEntry::stage() const { return id.substr(0, id.find('/')); }

std::string KernelEntry::report_group() const { return report.empty() ? stage() : report; }

bool KernelEntry::runs_dtype(DType dtype) const {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

std::string KernelEntry::dtypes_text() const {
  std::string text;
  for (DType t : dtypes) text += (text.empty() ? "" : ",") + std::string(dtype_name(t));
  return text;
}

Problem OpSpec::problem(std::vector<std::int64_t> dims, DType dtype, const ParamValues& values) const {
  return make_problem(name, params, std::move(dims), dtype, values);
}

bool OpSpec::has_dtype(DType dtype) const {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

bool OpSpec::has_param(std::string_view param_name) const {
  return std::any_of(params.begin(), params.end(), [&](const ParamSpec& p) { return p.name == param_name; });
}

namespace {

// "" when `p` is a well-formed problem of `op`: its name, as many dims, one of its dtypes, and its
// parameters in the op's order.
std::string malformed_reason(const OpSpec& op, const Problem& p) {
  if (p.op != op.name) return fmt::format("it names op '{}'", p.op);
  if (p.dims.size() != op.dim_names.size())
    return fmt::format("it has {} dimensions, the op {}", p.dims.size(), op.dim_names.size());
  if (!op.has_dtype(p.dtype)) return fmt::format("the op is not defined for {}", dtype_name(p.dtype));
  if (p.params.size() != op.params.size()) return "its parameters are not the op's";
  for (std::size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].name != op.params[i].name || p.params[i].default_value != op.params[i].default_value)
      return fmt::format("parameter {} is '{}', the op's is '{}'", i, p.params[i].name, op.params[i].name);
  return {};
}

}  // namespace

void Registry::add_op(OpSpec op) {
  require(!op.name.empty(), "an op needs a name");
  require(!has_op(op.name), "op '{}' registered twice", op.name);
  require(static_cast<bool>(op.make_operands) && static_cast<bool>(op.reset_operands) &&
              static_cast<bool>(op.reference) && static_cast<bool>(op.accuracy) &&
              static_cast<bool>(op.work),
          "op '{}' must define make_operands, reset_operands, reference, accuracy and work "
          "(build it with kc::build_op)", op.name);
  require(!op.dim_names.empty(), "op '{}' must name its dimensions", op.name);
  require(!op.dtypes.empty(), "op '{}' must name the dtypes it is defined for", op.name);
  for (const Problem& p : op.bench_problems) {
    const std::string reason = malformed_reason(op, p);
    require(reason.empty(), "op '{}': bench problem {} does not match the op: {}", op.name, p.label(), reason);
  }
  for (const Problem& p : op.conformance_problems) {
    const std::string reason = malformed_reason(op, p);
    require(reason.empty(), "op '{}': conformance problem {} does not match the op: {}", op.name,
            p.label(), reason);
  }
  ops_.push_back(std::move(op));
}

void Registry::add_kernel(KernelEntry kernel) {
  static const std::regex id_format("^(?:stage[1-4]|playground)/([a-z0-9_]+)/([A-Za-z0-9_]+)$");
  std::smatch match;
  require(std::regex_match(kernel.id, match, id_format),
          "kernel id '{}' must look like stageN/<op>/<name> or playground/<op>/<name> (letters, digits, '_')", kernel.id);
  require(match[1].str() == kernel.op, "kernel '{}' is filed under op '{}' but implements '{}'",
          kernel.id, match[1].str(), kernel.op);
  require(has_op(kernel.op), "kernel '{}': op '{}' is not registered; add the OpSpec first",
          kernel.id, kernel.op);
  require(static_cast<bool>(kernel.launch), "kernel '{}' has no launch function", kernel.id);
  require(!kernel.idea.empty(), "kernel '{}' needs a one-line idea", kernel.id);
  require(!kernel.dtypes.empty(), "kernel '{}' must list the dtypes it runs", kernel.id);
  for (DType t : kernel.dtypes)
    require(op(kernel.op).has_dtype(t), "kernel '{}' runs {}, for which op '{}' is not defined",
            kernel.id, dtype_name(t), kernel.op);
  require(kernel.min_compute_capability >= 50, "kernel '{}': minimum compute capability {} is not "
          "a capability (write 80 for sm_80)", kernel.id, kernel.min_compute_capability);
  for (const KernelEntry& k : kernels_)
    require(k.id != kernel.id, "kernel id '{}' registered twice", kernel.id);
  kernels_.push_back(std::move(kernel));
}

bool Registry::has_op(std::string_view name) const {
  for (const OpSpec& op : ops_)
    if (op.name == name) return true;
  return false;
}

const OpSpec& Registry::op(std::string_view name) const {
  for (const OpSpec& op : ops_)
    if (op.name == name) return op;
  throw Error(fmt::format("no op named '{}' is registered", name));
}

const KernelEntry& Registry::kernel(std::string_view id) const {
  for (const KernelEntry& k : kernels_)
    if (k.id == id) return k;
  throw Error(fmt::format("no kernel '{}' is registered; `kc-bench --list` shows them all", id));
}

std::vector<const KernelEntry*> Registry::select(const std::string& pattern) const {
  std::regex filter;
  try {
    filter = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw Error(fmt::format("bad filter '{}': {} (it is a regular expression searched in kernel ids)",
                            pattern, e.what()));
  }
  std::vector<const KernelEntry*> selected;
  for (const KernelEntry& k : kernels_)
    if (pattern.empty() || std::regex_search(k.id, filter)) selected.push_back(&k);
  return selected;
}

std::string unsupported_reason(const Registry& registry, const KernelEntry& kernel,
                               const Problem& problem, const DeviceInfo* device) {
  if (problem.op != kernel.op)
    return fmt::format("{} implements {}, not {}", kernel.id, kernel.op, problem.op);
  if (!kernel.unwritten.empty()) return kernel.unwritten;
  const OpSpec& op = registry.op(kernel.op);
  if (problem.dims.size() != op.dim_names.size())
    return fmt::format("{} takes {} dimensions, got {}", op.name, op.dim_names.size(),
                       problem.dims.size());
  if (!kernel.runs_dtype(problem.dtype))
    return fmt::format("{} runs {}, not {}", kernel.id, kernel.dtypes_text(), dtype_name(problem.dtype));
  if (device != nullptr && device->compute_capability() < kernel.min_compute_capability)
    return fmt::format("{} needs compute capability {}.{} or newer; {} is {}.{}", kernel.id,
                       kernel.min_compute_capability / 10, kernel.min_compute_capability % 10,
                       device->name, device->cc_major, device->cc_minor);
  if (device != nullptr && kernel.max_compute_capability != 0 &&
      device->compute_capability() > kernel.max_compute_capability)
    return fmt::format("{} is built only for sm_{} (architecture-specific instructions); {} is {}.{}",
                       kernel.id, kernel.max_compute_capability, device->name, device->cc_major,
                       device->cc_minor);
  if (op.supports) {
    std::string reason = op.supports(problem);
    if (!reason.empty()) return reason;
  }
  if (kernel.supports) return kernel.supports(problem);
  return {};
}

}  // namespace kc
