// The progress text a person watching a run sees (issue 16 item 6): steps/s and an ETA for the
// step line, and a one-line progress bar redrawn in place (carriage return, erase to the end of
// the line) when rank 0's stdout is a terminal. Formatting only; the trainer decides when.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

// "12s", "4m05s", "2h03m", "3d04h"; "?" for a negative or non-finite number of seconds.
std::string formatDuration(double seconds);

// "[=========>          ]  45/100  45% | 2.10 steps/s | 12.3k tok/s | ETA 26s": `width` columns
// in total at most (the bar shrinks to fit, at least 10 cells). stepsPerSec <= 0: rate and ETA
// are left out.
std::string formatProgressBar(int64_t step, int64_t total, double stepsPerSec, double tokensPerSec,
                              int width);

// What redraws the bar in place: "\r" + bar + erase to end of line (ESC [ K), no newline.
std::string progressBarRedraw(const std::string& bar);
// What removes it before an ordinary line is printed: "\r" + ESC [ K.
std::string progressBarClear();

}  // namespace ds::runtime
