// The timeline as a self-contained SVG: per rank, the compute spans by nesting depth, one lane per
// collective stream, and the memory held as a stacked area on a y axis in bytes, under the device's
// capacity when it is known; a time axis and a legend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "traces/replay/timeline.h"

namespace zero3 {

namespace {

constexpr double kWidth = 1600.0;
constexpr double kLeft = 150.0;   // room for lane labels
constexpr double kRight = 20.0;
constexpr double kRow = 12.0;     // one nesting level of compute spans, or one collective lane
constexpr double kMemoryHeight = 160.0;  // room for a readable y axis and the capacity line
constexpr int kRanksDrawn = 8;    // a full simulation of many ranks draws its first ranks

const char* color_of(const std::string& category) {
  if (category == "step") return "#9e9e9e";
  if (category == "phase") return "#cfd8dc";
  if (category == "forward") return "#1e88e5";
  if (category == "backward") return "#fb8c00";
  if (category == "recompute") return "#90caf9";
  if (category == "offload") return "#6d4c41";
  if (category == "optimizer") return "#43a047";
  if (category == "all_gather") return "#8e24aa";
  if (category == "reduce_scatter") return "#e53935";
  return "#00897b";
}

const char* kCategoryColors[] = {"#1565c0", "#90caf9", "#ef6c00", "#ffcc80", "#2e7d32", "#ab47bc", "#78909c", "#64b5f6"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string seconds_label(double seconds) {
  char buffer[32];
  if (seconds >= 1.0) std::snprintf(buffer, sizeof buffer, "%.3g s", seconds);
  else if (seconds >= 1e-3) std::snprintf(buffer, sizeof buffer, "%.3g ms", seconds * 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.3g us", seconds * 1e6);
  return buffer;
}

// The step of the memory band's y axis: 1, 2, 2.5 or 5 times a power of ten, the smallest that
// reaches `max_bytes` in at most four steps, so the labels stay round and there are 3 to 5 of them.
double memory_tick_step(double max_bytes) {
  double power = std::pow(10.0, std::floor(std::log10(max_bytes / 4.0)));
  while (4.0 * power > max_bytes) power /= 10.0;  // log10 rounded up at an exact power of ten
  for (;; power *= 10.0) {
    for (const double mantissa : {1.0, 2.0, 2.5, 5.0}) {
      if (max_bytes <= 4.0 * mantissa * power * (1.0 + 1e-12)) return mantissa * power;
    }
  }
}

// The y axis's ticks from 0 to the first at or above `max_bytes`, so that whatever the axis must
// show (the peak, the capacity) lies on it.
std::vector<double> memory_ticks(double max_bytes) {
  if (!(max_bytes > 0.0) || !std::isfinite(max_bytes)) return {};
  const double step = memory_tick_step(max_bytes);
  const int steps = static_cast<int>(std::ceil(max_bytes / step * (1.0 - 1e-12)));
  std::vector<double> ticks;
  for (int tick = 0; tick <= steps; ++tick) ticks.push_back(step * tick);
  return ticks;
}

// An axis value in the decimal unit that keeps it short, as datasheets write it: "250 MB", "80 GB".
std::string axis_bytes_label(double bytes) {
  if (bytes == 0.0) return "0";
  char buffer[32];
  if (bytes >= 1e9) std::snprintf(buffer, sizeof buffer, "%g GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buffer, sizeof buffer, "%g MB", bytes / 1e6);
  else if (bytes >= 1e3) std::snprintf(buffer, sizeof buffer, "%g kB", bytes / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%g B", bytes);
  return buffer;
}

std::string bytes_label(int64_t bytes) {
  char buffer[32];
  if (bytes >= 1'000'000'000) std::snprintf(buffer, sizeof buffer, "%.1f GB", static_cast<double>(bytes) / 1e9);
  else if (bytes >= 1'000'000) std::snprintf(buffer, sizeof buffer, "%.1f MB", static_cast<double>(bytes) / 1e6);
  else std::snprintf(buffer, sizeof buffer, "%.1f kB", static_cast<double>(bytes) / 1e3);
  return buffer;
}

class SvgPainter {
 public:
  explicit SvgPainter(const Timeline& timeline) : timeline_(timeline) {
    scale_ = (kWidth - kLeft - kRight) / static_cast<double>(std::max<int64_t>(timeline.end_ns, 1));
  }

  double x(int64_t ns) const { return kLeft + static_cast<double>(ns) * scale_; }

  // Compute spans of one rank, each on the row of its nesting depth; returns the rows used.
  int compute_lane(int rank, double top) {
    std::vector<int64_t> open_ends;
    int rows = 1;
    for (const TimelineEvent& event : timeline_.events) {
      if (event.rank != rank || event.track != kComputeTrack) continue;
      while (!open_ends.empty() && event.start_ns >= open_ends.back()) open_ends.pop_back();
      const int depth = static_cast<int>(open_ends.size());
      open_ends.push_back(event.end_ns);
      rows = std::max(rows, depth + 1);
      span(event, top + depth * kRow);
    }
    return rows;
  }

  void collective_lane(int rank, int track, double top) {
    for (const TimelineEvent& event : timeline_.events) {
      if (event.rank == rank && event.track == track) span(event, top);
    }
  }

  // Grid lines and labels of the memory band's y axis, from 0 at the bottom to `ticks.back()` at the top.
  void memory_axis(double top, const std::vector<double>& ticks) {
    if (ticks.empty()) return;
    out_ << "<line x1=\"" << kLeft << "\" y1=\"" << top << "\" x2=\"" << kLeft << "\" y2=\"" << top + kMemoryHeight
         << "\" stroke=\"#999\"/>\n";
    for (const double tick : ticks) {
      const double at = y(tick, top, ticks.back());
      out_ << "<line x1=\"" << kLeft << "\" y1=\"" << at << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << at
           << "\" stroke=\"#e0e0e0\"/>\n<text x=\"" << kLeft - 4 << "\" y=\"" << at + 3
           << "\" font-size=\"9\" text-anchor=\"end\">" << axis_bytes_label(tick) << "</text>\n";
    }
  }

  // The device's memory as a dashed line across the band, labelled at the right end; the label sits
  // under the line when the line is at the band's top, where the lane above would cover it.
  void capacity_line(double top, double range, double capacity_bytes, const std::string& device_name) {
    const double at = y(capacity_bytes, top, range);
    const double label_y = at - top < 12.0 ? at + 11.0 : at - 3.0;
    const std::string label =
        (device_name.empty() ? "device memory" : device_name) + ": " + axis_bytes_label(capacity_bytes);
    out_ << "<line x1=\"" << kLeft << "\" y1=\"" << at << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << at
         << "\" stroke=\"#c62828\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n<text x=\"" << kWidth - kRight - 4
         << "\" y=\"" << label_y << "\" font-size=\"10\" text-anchor=\"end\" fill=\"#c62828\" stroke=\"#fff\" "
         << "stroke-width=\"3\" paint-order=\"stroke\">" << escape(label) << "</text>\n";
  }

  // `range`: the bytes at the band's top (the y axis's last tick).
  void memory_area(const TimelineMemory& memory, double top, double range) {
    const std::vector<MemorySample> samples = per_pixel(memory.samples);
    if (samples.empty() || range <= 0.0) return;
    // One stacked band per category, drawn as steps: a value holds until the next sample.
    const size_t count = samples.size();
    std::vector<int64_t> start_ns(count), end_ns(count), below(count, 0);
    for (size_t i = 0; i < count; ++i) {
      start_ns[i] = std::llround(samples[i].time_s * 1e9);
      end_ns[i] = i + 1 < count ? std::llround(samples[i + 1].time_s * 1e9) : timeline_.end_ns;
    }
    for (int category = 0; category < kMemoryCategoryCount; ++category) {
      if (is_host_memory(static_cast<MemoryCategory>(category))) continue;  // the band is device memory
      std::ostringstream points;
      std::vector<int64_t> above(count);
      for (size_t i = 0; i < count; ++i) {
        above[i] = below[i] + samples[i].bytes[static_cast<size_t>(category)];
        points << x(start_ns[i]) << ',' << y(above[i], top, range) << ' ' << x(end_ns[i]) << ','
               << y(above[i], top, range) << ' ';
      }
      for (size_t i = count; i-- > 0;) {
        points << x(end_ns[i]) << ',' << y(below[i], top, range) << ' ' << x(start_ns[i]) << ','
               << y(below[i], top, range) << ' ';
      }
      out_ << "<polygon points=\"" << points.str() << "\" fill=\"" << kCategoryColors[category] << "\" stroke=\"none\"/>\n";
      below = above;
    }
  }

  std::ostringstream& out() { return out_; }

 private:
  static double y(double bytes, double top, double range) {
    return top + kMemoryHeight - kMemoryHeight * bytes / range;
  }

  // Keeps, of the samples that fall on one pixel column, the one holding the most bytes, so the
  // picture keeps every peak and stays small however many samples a long replay has.
  std::vector<MemorySample> per_pixel(const std::vector<MemorySample>& samples) const {
    std::vector<MemorySample> out;
    auto total = [](const MemorySample& sample) {
      int64_t bytes = 0;
      for (int64_t value : sample.bytes) bytes += value;
      return bytes;
    };
    int64_t column = -1;
    for (const MemorySample& sample : samples) {
      const int64_t here = static_cast<int64_t>(x(std::llround(sample.time_s * 1e9)));
      if (here != column) {
        out.push_back(sample);
        column = here;
      } else if (total(sample) > total(out.back())) {
        out.back().bytes = sample.bytes;
      }
    }
    return out;
  }

  // ", inter-node" for a collective whose level is known: the link it was priced on.
  static std::string level_of(const TimelineEvent& event) {
    if (!event.args.contains("level") || event.args.at("level").get<std::string>().empty()) return "";
    return ", " + event.args.at("level").get<std::string>();
  }

  void span(const TimelineEvent& event, double top) {
    const double left = x(event.start_ns);
    const double width = std::max(0.4, x(event.end_ns) - left);
    // Spans under a pixel that land where the last one of their row and kind was drawn add nothing.
    const std::string row = std::to_string(top) + event.category;
    const int64_t column = static_cast<int64_t>(left);
    if (width < 1.0 && last_column_[row] == column) return;
    last_column_[row] = column;
    out_ << "<rect x=\"" << left << "\" y=\"" << top + 1 << "\" width=\"" << width << "\" height=\"" << kRow - 2
         << "\" fill=\"" << color_of(event.category) << "\"><title>" << escape(event.name) << " ("
         << seconds_label(static_cast<double>(event.end_ns - event.start_ns) * 1e-9) << level_of(event)
         << ")</title></rect>\n";
    if (width > 7.0 * static_cast<double>(event.name.size())) {
      out_ << "<text x=\"" << left + 2 << "\" y=\"" << top + kRow - 3 << "\" font-size=\"8\" fill=\"#fff\">"
           << escape(event.name) << "</text>\n";
    }
  }

  const Timeline& timeline_;
  double scale_ = 1.0;
  std::ostringstream out_;
  std::map<std::string, int64_t> last_column_;
};

void axis(std::ostringstream& out, const SvgPainter& painter, int64_t end_ns, double top, double bottom) {
  for (int tick = 0; tick <= 10; ++tick) {
    const int64_t ns = end_ns * tick / 10;
    out << "<line x1=\"" << painter.x(ns) << "\" y1=\"" << top << "\" x2=\"" << painter.x(ns) << "\" y2=\"" << bottom
        << "\" stroke=\"#eee\"/>\n<text x=\"" << painter.x(ns) << "\" y=\"" << top - 4
        << "\" font-size=\"10\" text-anchor=\"middle\">" << seconds_label(static_cast<double>(ns) * 1e-9) << "</text>\n";
  }
}

void legend(std::ostringstream& out, double top) {
  double left = kLeft;
  auto item = [&](const char* color, const std::string& label) {
    out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"10\" height=\"10\" fill=\"" << color << "\"/>"
        << "<text x=\"" << left + 14 << "\" y=\"" << top + 9 << "\" font-size=\"10\">" << label << "</text>\n";
    left += 20.0 + 6.5 * static_cast<double>(label.size());
  };
  for (const char* category : {"step", "phase", "forward", "recompute", "backward", "optimizer", "offload",
                               "all_gather", "reduce_scatter"}) {
    item(color_of(category), category);
  }
  item(color_of("all_reduce"), "other collectives");
  for (int category = 0; category < kMemoryCategoryCount; ++category) {
    if (is_host_memory(static_cast<MemoryCategory>(category))) continue;
    item(kCategoryColors[category], std::string("mem ") + memory_category_name(static_cast<MemoryCategory>(category)));
  }
}

}  // namespace

std::string timeline_svg(const Timeline& timeline) {
  SvgPainter painter(timeline);
  std::ostringstream& body = painter.out();
  double top = 60.0;
  int64_t peak_bytes = 0;
  for (const TimelineMemory& memory : timeline.memory) {
    for (const MemorySample& sample : memory.samples) {
      int64_t total = 0;
      for (int64_t bytes : sample.bytes) total += bytes;
      peak_bytes = std::max(peak_bytes, total);
    }
  }
  // One y axis for every rank, tall enough for the peak and the capacity: a run far under the
  // device's memory still shows the line, and one over it shows the peak above the line.
  const double capacity = timeline.device_memory_bytes;
  const bool capacity_known = capacity > 0.0 && std::isfinite(capacity);
  const double shown_bytes = std::max(static_cast<double>(peak_bytes), capacity_known ? capacity : 0.0);
  const std::vector<double> ticks = memory_ticks(shown_bytes);
  const double range = ticks.empty() ? 0.0 : ticks.back();
  const size_t drawn = std::min<size_t>(timeline.ranks.size(), kRanksDrawn);
  for (size_t index = 0; index < drawn; ++index) {
    const int rank = timeline.ranks[index];
    const std::string label = timeline.symmetric ? "rank " + std::to_string(rank) + " (all ranks)" : "rank " + std::to_string(rank);
    body << "<text x=\"4\" y=\"" << top + 10 << "\" font-size=\"11\" font-weight=\"bold\">" << escape(label) << "</text>\n";
    const int rows = painter.compute_lane(rank, top);
    body << "<text x=\"4\" y=\"" << top + 22 << "\" font-size=\"10\">compute</text>\n";
    top += rows * kRow + 4;
    for (int track = kAllGatherTrack; track < kTimelineTrackCount; ++track) {
      body << "<text x=\"4\" y=\"" << top + 9 << "\" font-size=\"10\">" << timeline_track_name(track) << "</text>\n";
      painter.collective_lane(rank, track, top);
      top += kRow;
    }
    body << "<text x=\"4\" y=\"" << top + 12 << "\" font-size=\"10\">memory</text>\n<text x=\"4\" y=\"" << top + 24
         << "\" font-size=\"10\">peak " << bytes_label(peak_bytes) << "</text>\n";
    painter.memory_axis(top, ticks);
    painter.memory_area(timeline.memory[index], top, range);
    if (capacity_known) painter.capacity_line(top, range, capacity, timeline.device_name);
    top += kMemoryHeight + 16;
  }
  std::ostringstream svg;
  const double height = top + 30;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
      << "<text x=\"4\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" << escape(timeline.title) << "</text>\n";
  if (timeline.ranks.size() > drawn) {
    svg << "<text x=\"4\" y=\"34\" font-size=\"10\">first " << drawn << " of " << timeline.ranks.size()
        << " ranks drawn; the Chrome trace JSON holds all</text>\n";
  }
  axis(svg, painter, timeline.end_ns, 56.0, top);
  svg << body.str();
  legend(svg, top + 6);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace zero3
