// Checks made before the first training step, so that a run that cannot keep its results fails
// at once instead of after the last step: every folder the run will write (train.checkpoint.dir
// on every rank; on rank 0 the --summary file's folder and the CSV / TensorBoard monitor folders)
// must be a folder this process can create files in, or not exist yet below one. Checked by
// creating and removing a file (a real write, so read-only mounts, permissions and full inode
// tables all show); nothing is left behind and no folder is created. Not the writing itself.
#pragma once

#include <string>

#include "runtime/config/plan.h"

namespace ds::runtime {

// Throws ConfigError naming the setting, the path and the reason ("train.checkpoint.dir
// '/ck': cannot create files in '/ck': Read-only file system").
void checkOutputsWritable(const Plan& plan, const std::string& summaryPath, int rank);

// One path: `what` names the setting in the error. `isFile`: path names a file to be written
// (its folder must exist, unless it is `createdDir`, a folder the run creates before it);
// otherwise path is a folder the run creates when missing.
void checkWritable(const std::string& what, const std::string& path, bool isFile,
                   const std::string& createdDir = "");

}  // namespace ds::runtime
