// Reads ptxas's resource report (NVRTC option --ptxas-options=-v) out of NVRTC's log.
// It is there with no GPU present, so CI checks registers and spills of sm_70 kernels.
#pragma once
#include <string>

#include "cache/record.h"

namespace onecat {

// The report of entry function `lowered_name`, or of the only entry when it is empty.
// Throws Error when the log holds no report for it.
ResourceUsage parse_ptxas_report(const std::string& log, const std::string& lowered_name);

}  // namespace onecat
