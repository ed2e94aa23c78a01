// `dsrt hello`: the built-in rank program that proves a launch (see hello_command.cc).
#pragma once

namespace ds::runtime {

int helloCommand(int argc, char** argv);

}  // namespace ds::runtime
