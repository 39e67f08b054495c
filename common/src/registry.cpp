#include "kc/common/registry.hpp"

#include <regex>

namespace kc {

std::string KernelEntry::stage() const { return id.substr(0, id.find('/')); }

std::string KernelEntry::report_group() const { return report.empty() ? stage() : report; }

void Registry::add_op(OpSpec op) {
  require(!op.name.empty(), "an op needs a name");
  require(!has_op(op.name), "op '{}' registered twice", op.name);
  require(static_cast<bool>(op.make_operands) && static_cast<bool>(op.reference) &&
              static_cast<bool>(op.accuracy) && static_cast<bool>(op.work),
          "op '{}' must define make_operands, reference, accuracy and work", op.name);
  require(!op.dim_names.empty(), "op '{}' must name its dimensions", op.name);
  for (const Problem& p : op.bench_problems)
    require(p.op == op.name && p.dims.size() == op.dim_names.size(),
            "op '{}': bench problem {} does not match the op", op.name, p.label());
  for (const Problem& p : op.conformance_problems)
    require(p.op == op.name && p.dims.size() == op.dim_names.size(),
            "op '{}': conformance problem {} does not match the op", op.name, p.label());
  ops_.push_back(std::move(op));
}

void Registry::add_kernel(KernelEntry kernel) {
  static const std::regex id_format("^stage[1-4]/([a-z0-9_]+)/([A-Za-z0-9_]+)$");
  std::smatch match;
  require(std::regex_match(kernel.id, match, id_format),
          "kernel id '{}' must look like stageN/<op>/<name> (letters, digits, '_')", kernel.id);
  require(match[1].str() == kernel.op, "kernel '{}' is filed under op '{}' but implements '{}'",
          kernel.id, match[1].str(), kernel.op);
  require(has_op(kernel.op), "kernel '{}': op '{}' is not registered; add the OpSpec first",
          kernel.id, kernel.op);
  require(static_cast<bool>(kernel.launch), "kernel '{}' has no launch function", kernel.id);
  require(!kernel.idea.empty(), "kernel '{}' needs a one-line idea", kernel.id);
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
  const OpSpec& op = registry.op(kernel.op);
  if (problem.dims.size() != op.dim_names.size())
    return fmt::format("{} takes {} dimensions, got {}", op.name, op.dim_names.size(),
                       problem.dims.size());
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
