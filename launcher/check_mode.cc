// dsrun train --check: see check_mode.h.
#include "launcher/check_mode.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "core/error.h"

namespace ds::launcher {

bool isTrainCheck(const std::vector<std::string>& program) {
  if (program.empty() || program[0] != "train") return false;
  for (size_t i = 1; i < program.size(); ++i)
    if (program[i] == "--check") return true;
  return false;
}

std::vector<std::string> trainCheckArgv(const JobSpec& spec) {
  std::vector<std::string> argv = {spec.program[0], "check"};
  for (size_t i = 2; i < spec.program.size(); ++i)
    if (spec.program[i] != "--check" && spec.program[i].rfind("--local_rank", 0) != 0)
      argv.push_back(spec.program[i]);
  argv.push_back("--world_size=" + std::to_string(spec.worldSize()));
  return argv;
}

void execTrainCheck(const JobSpec& spec) {
  std::vector<std::string> args = trainCheckArgv(spec);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(argv[0], argv.data());
  throw SystemError("exec " + args[0], errno);
}

}  // namespace ds::launcher
