#include "initiator/bench/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

namespace rdmablk::initiator::bench {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string plot_title(const std::vector<JobResult>& results, const std::string& job_file) {
  if (!job_file.empty()) return job_file;
  if (results.empty() || results.front().spec.where.empty()) return "rdmablk bench";
  std::string where = results.front().spec.where;
  std::size_t colon = where.rfind(':');
  if (colon != std::string::npos && colon + 1 < where.size() &&
      std::all_of(where.begin() + static_cast<std::ptrdiff_t>(colon) + 1, where.end(), [](char c) { return c >= '0' && c <= '9'; }))
    where.resize(colon);
  return where;
}

namespace {

struct Point {
  double x = 0, y = 0;
};

struct Marker {
  Point at;
  std::string tooltip;
};

struct Series {
  std::string label;
  std::vector<Point> points;
  std::vector<Marker> markers;
};

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<std::pair<double, std::string>> ticks;
  std::string label;
};

struct Chart {
  std::string kind;  // "iops", "bw", "clat": the svg's class
  std::string title;
  std::string subtitle;
  Axis x, y;
  std::vector<Series> series;
};

// fio_generate_plots' colours (ColorBrewer Set1) and more; after 10 series the dash pattern changes.
constexpr std::array<const char*, 10> kPalette{"#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00",
                                               "#a65628", "#f781bf", "#999999", "#17becf", "#bcbd22"};
constexpr std::array<const char*, 3> kDashes{"", "6 3", "2 2"};

constexpr double kWidth = 960;
constexpr double kLeft = 84, kRight = 32, kTop = 64, kPlotHeight = 380, kBelowPlot = 58;
constexpr double kLegendRow = 18;
constexpr double kPlotWidth = kWidth - kLeft - kRight;

std::string num(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s == "-0.0") s = "0.0";
  return s;
}

// The 1, 2 or 5 times a power of ten nearest to x (Heckbert's "nice numbers"): 4 to 8 ticks for x = max / 5.
double nice_step(double x) {
  if (!(x > 0)) return 1;
  double e = std::pow(10.0, std::floor(std::log10(x)));
  double f = x / e;
  double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  return nf * e;
}

// A tick label with as many decimals as the step needs, k/M for big numbers (250k, 1.5M).
std::string tick_label(double v, double step) {
  const char* suffix = "";
  if (step >= 1e6) {
    v /= 1e6;
    step /= 1e6;
    suffix = "M";
  } else if (step >= 1e3) {
    v /= 1e3;
    step /= 1e3;
    suffix = "k";
  }
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}{}", v, decimals, suffix);
}

Axis linear_axis(double max_value, std::string label) {
  Axis a;
  a.label = std::move(label);
  double step = nice_step((max_value > 0 ? max_value : 1) / 5);
  a.lo = 0;
  a.hi = std::max(step, std::ceil(max_value / step - 1e-9) * step);
  for (int i = 0; i * step <= a.hi + step * 1e-6; ++i) a.ticks.emplace_back(i * step, tick_label(i * step, step));
  return a;
}

std::string plain(double v) { return v >= 1 ? fmt::format("{:.0f}", v) : fmt::format("{:g}", v); }

Axis log_axis(double min_value, double max_value, std::string label) {
  Axis a;
  a.label = std::move(label);
  a.log = true;
  int lo = static_cast<int>(std::floor(std::log10(min_value)));
  int hi = static_cast<int>(std::ceil(std::log10(max_value)));
  if (hi <= lo) hi = lo + 1;
  a.lo = std::pow(10.0, lo);
  a.hi = std::pow(10.0, hi);
  for (int e = lo; e <= hi; ++e) {
    double p = std::pow(10.0, e);
    a.ticks.emplace_back(p, plain(p));
    if (hi - lo <= 2 && e < hi) {
      a.ticks.emplace_back(2 * p, plain(2 * p));
      a.ticks.emplace_back(5 * p, plain(5 * p));
    }
  }
  return a;
}

double fraction(const Axis& a, double v) {
  if (a.log) {
    double lv = std::log10(std::max(v, a.lo));
    return (lv - std::log10(a.lo)) / (std::log10(a.hi) - std::log10(a.lo));
  }
  return (v - a.lo) / (a.hi - a.lo);
}
double px(const Chart& c, double x) { return kLeft + fraction(c.x, x) * kPlotWidth; }
double py(const Chart& c, double y) { return kTop + kPlotHeight - fraction(c.y, y) * kPlotHeight; }

using SvgOut = std::back_insert_iterator<std::string>;

// The SVG element, title and subtitle.
void render_header(SvgOut out, const Chart& c, double height) {
  fmt::format_to(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"{}\" width=\"{}\" height=\"{}\" "
                 "viewBox=\"0 0 {} {}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
                 c.kind, num(kWidth), num(height), num(kWidth), num(height));
  fmt::format_to(out, "<title>{}</title>\n", xml_escape(c.title));
  fmt::format_to(out, "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", num(kWidth), num(height));
  fmt::format_to(out, "<text class=\"title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                 num(kWidth / 2), xml_escape(c.title));
  if (!c.subtitle.empty())
    fmt::format_to(out, "<text class=\"subtitle\" x=\"{}\" y=\"44\" text-anchor=\"middle\" fill=\"#555555\">{}</text>\n",
                   num(kWidth / 2), xml_escape(c.subtitle));
}

// Grid, axes, ticks and their labels, the axis labels; "no data" when there are no series.
void render_axes(SvgOut out, const Chart& c) {
  const double bottom = kTop + kPlotHeight;
  // Grid and ticks.
  fmt::format_to(out, "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n");
  for (const auto& [v, label] : c.x.ticks)
    fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(px(c, v)), num(kTop), num(bottom));
  for (const auto& [v, label] : c.y.ticks)
    fmt::format_to(out, "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", num(py(c, v)), num(kLeft), num(kLeft + kPlotWidth));
  fmt::format_to(out, "</g>\n");
  fmt::format_to(out, "<g class=\"axes\" stroke=\"#000000\" stroke-width=\"1\">\n");
  fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>\n", num(kLeft), num(bottom), num(kLeft + kPlotWidth));
  fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(kLeft), num(kTop), num(bottom));
  for (const auto& [v, label] : c.x.ticks)
    fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", num(px(c, v)), num(bottom), num(bottom + 4));
  for (const auto& [v, label] : c.y.ticks)
    fmt::format_to(out, "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", num(py(c, v)), num(kLeft - 4), num(kLeft));
  fmt::format_to(out, "</g>\n");
  fmt::format_to(out, "<g class=\"tick-labels\" fill=\"#000000\">\n");
  for (const auto& [v, label] : c.x.ticks)
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(px(c, v)), num(bottom + 18), xml_escape(label));
  for (const auto& [v, label] : c.y.ticks)
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 8), num(py(c, v) + 4), xml_escape(label));
  fmt::format_to(out, "</g>\n");
  fmt::format_to(out, "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                 num(kLeft + kPlotWidth / 2), num(bottom + 40), xml_escape(c.x.label));
  const double yl_x = 20, yl_y = kTop + kPlotHeight / 2;
  fmt::format_to(out, "<text class=\"axis-label\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                 num(yl_x), num(yl_y), xml_escape(c.y.label));
  if (c.series.empty())
    fmt::format_to(out, "<text class=\"no-data\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555555\">no data</text>\n",
                   num(kLeft + kPlotWidth / 2), num(kTop + kPlotHeight / 2));
}

const char* series_color(std::size_t i) { return kPalette[i % kPalette.size()]; }

std::string series_dash(std::size_t i) {
  const char* d = kDashes[(i / kPalette.size()) % kDashes.size()];
  return *d ? fmt::format(" stroke-dasharray=\"{}\"", d) : std::string();
}

// One polyline per series, then their markers (a lone point gets one: it draws no line).
void render_series(SvgOut out, const Chart& c) {
  const std::size_t n = c.series.size();
  fmt::format_to(out, "<g class=\"series\" fill=\"none\" stroke-width=\"1.5\" stroke-linejoin=\"round\">\n");
  for (std::size_t i = 0; i < n; ++i) {
    const Series& s = c.series[i];
    fmt::format_to(out, "<polyline class=\"series\" data-label=\"{}\" stroke=\"{}\"{} points=\"", xml_escape(s.label), series_color(i), series_dash(i));
    for (std::size_t k = 0; k < s.points.size(); ++k)
      fmt::format_to(out, "{}{},{}", k ? " " : "", num(px(c, s.points[k].x)), num(py(c, s.points[k].y)));
    fmt::format_to(out, "\"><title>{}</title></polyline>\n", xml_escape(s.label));
  }
  fmt::format_to(out, "</g>\n<g class=\"markers\" stroke=\"none\">\n");
  for (std::size_t i = 0; i < n; ++i) {
    const Series& s = c.series[i];
    std::vector<Marker> markers = s.markers;
    if (s.points.size() == 1 && markers.empty()) markers.push_back({s.points[0], s.label});  // a lone point draws no line
    for (const Marker& m : markers)
      fmt::format_to(out, "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>\n", num(px(c, m.at.x)),
                     num(py(c, m.at.y)), series_color(i), xml_escape(m.tooltip));
  }
  fmt::format_to(out, "</g>\n");
}

// In one column, or two for many short labels.
void render_legend(SvgOut out, const Chart& c, std::size_t rows, std::size_t columns) {
  const std::size_t n = c.series.size();
  const double bottom = kTop + kPlotHeight;
  fmt::format_to(out, "<g class=\"legend\">\n");
  const double column_width = kPlotWidth / static_cast<double>(columns);
  for (std::size_t i = 0; i < n; ++i) {
    double x = kLeft + static_cast<double>(i / rows) * column_width;
    double y = bottom + kBelowPlot + static_cast<double>(i % rows) * kLegendRow;
    fmt::format_to(out,
                   "<g class=\"legend-entry\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
                   "<text x=\"{}\" y=\"{}\">{}</text></g>\n",
                   num(x), num(y - 4), num(x + 24), num(y - 4), series_color(i), series_dash(i), num(x + 30), num(y), xml_escape(c.series[i].label));
  }
  fmt::format_to(out, "</g>\n");
}

std::string render(const Chart& c) {
  const std::size_t n = c.series.size();
  std::size_t longest = 0;
  for (const Series& s : c.series) longest = std::max(longest, s.label.size());
  const std::size_t columns = n > 6 && longest <= 60 ? 2 : 1;
  const std::size_t rows = (n + columns - 1) / columns;
  const double height = kTop + kPlotHeight + kBelowPlot + static_cast<double>(std::max<std::size_t>(rows, 1)) * kLegendRow + 12;

  std::string o;
  auto out = std::back_inserter(o);
  render_header(out, c, height);
  render_axes(out, c);
  render_series(out, c);
  render_legend(out, c, rows, columns);
  fmt::format_to(out, "</svg>\n");
  return o;
}

std::vector<std::string> job_labels(const std::vector<JobResult>& results) {
  std::map<std::string, unsigned> count;
  for (const JobResult& r : results) ++count[r.spec.name];
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string& name = results[i].spec.name;
    if (name.empty())
      labels.push_back(fmt::format("job {}", i + 1));
    else if (count[name] > 1)
      labels.push_back(fmt::format("{} (job {})", name, i + 1));
    else
      labels.push_back(name);
  }
  return labels;
}

Chart time_chart(const std::vector<JobResult>& results, const std::string& title, bool bandwidth) {
  Chart c;
  c.kind = bandwidth ? "bw" : "iops";
  c.title = fmt::format("{}: {}", bandwidth ? "Bandwidth" : "IOPS", title);
  c.subtitle = "per job; a line per direction for jobs doing more than one";
  std::vector<std::string> labels = job_labels(results);
  double max_t = 0, max_y = 0;
  // x is the time since the first job started, so jobs of later stonewall phases (and startdelay) show
  // where they ran; a job's timeline counts from its own start.
  uint64_t first_start = UINT64_MAX;
  for (const auto& r : results) first_start = std::min(first_start, r.job_start_ms);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& timeline = results[i].timeline;
    const double t0 = static_cast<double>(results[i].job_start_ms - first_start) / 1000.0;
    std::vector<std::size_t> dirs;
    for (std::size_t d = 0; d < kDdirs; ++d)
      if (std::any_of(timeline.begin(), timeline.end(), [&](const IntervalSample& s) { return s.ios[d] || s.bytes[d]; }))
        dirs.push_back(d);
    if (dirs.empty()) continue;
    std::vector<std::vector<std::size_t>> groups;
    if (dirs.size() == 1)
      groups.push_back(dirs);
    else
      for (std::size_t d : dirs) groups.push_back({d});
    for (const auto& group : groups) {
      Series s;
      s.label = groups.size() == 1 ? labels[i] : fmt::format("{} {}", labels[i], ddir_name(static_cast<Ddir>(group[0])));
      uint64_t prev = 0;
      for (const IntervalSample& sample : timeline) {
        if (sample.t_ms <= prev) continue;
        double dt_s = static_cast<double>(sample.t_ms - prev) / 1000.0;
        prev = sample.t_ms;
        uint64_t v = 0;
        for (std::size_t d : group) v += bandwidth ? sample.bytes[d] : sample.ios[d];
        double y = static_cast<double>(v) / dt_s;
        if (bandwidth) y /= 1048576.0;
        s.points.push_back({t0 + static_cast<double>(sample.t_ms) / 1000.0, y});
        max_t = std::max(max_t, s.points.back().x);
        max_y = std::max(max_y, y);
      }
      c.series.push_back(std::move(s));
    }
  }
  c.x = linear_axis(max_t, "time (s)");
  c.y = linear_axis(max_y, bandwidth ? "MiB/s" : "IOPS");
  return c;
}

// fio's log "nines" scale: 0 -> 0, 90% -> 1, 99% -> 2, 99.9% -> 3.
double nines(double percent) { return -std::log10(1.0 - percent / 100.0); }
constexpr double kMaxNines = 6;  // 99.9999%

}  // namespace

std::string iops_svg(const std::vector<JobResult>& results, const std::string& title) {
  return render(time_chart(results, title, false));
}

std::string bw_svg(const std::vector<JobResult>& results, const std::string& title) {
  return render(time_chart(results, title, true));
}

std::string clat_svg(const std::vector<JobResult>& results, const std::string& title) {
  Chart c;
  c.kind = "clat";
  c.title = fmt::format("Completion latency: {}", title);
  c.subtitle = "percentiles per job and direction";
  std::vector<std::string> labels = job_labels(results);
  double max_x = 1, min_y = HUGE_VAL, max_y = 0;
  static constexpr double kMarked[] = {50, 90, 99, 99.9, 99.99, 99.999, 99.9999};
  for (std::size_t i = 0; i < results.size(); ++i) {
    const DirectionStats* dirs[kDdirs] = {&results[i].read, &results[i].write, &results[i].trim};
    for (std::size_t d = 0; d < kDdirs; ++d) {
      const LatencyHistogram& h = dirs[d]->clat;
      if (h.count() == 0) continue;
      Series s;
      s.label = fmt::format("{} {}", labels[i], ddir_name(static_cast<Ddir>(d)));
      // Percentiles every 0.05 nines up to log10(samples) nines (where fio's rule reaches the last
      // sample but one), then the maximum at the largest sample's plotting position log10(samples + 1),
      // kept inside this series' axis range.
      const double n = static_cast<double>(h.count());
      double top = std::min(kMaxNines, std::log10(n));
      double axis_top = std::max(1.0, std::ceil(top - 1e-9));
      max_x = std::max(max_x, axis_top);
      auto add = [&](double x, double us) {
        s.points.push_back({x, us});
        if (us > 0) min_y = std::min(min_y, us);
        max_y = std::max(max_y, us);
      };
      auto pct_us = [&](double p) { return static_cast<double>(h.percentile(p)) / 1000.0; };
      int steps = static_cast<int>(std::floor(top / 0.05 + 1e-9));
      for (int k = 0; k <= steps; ++k) add(k * 0.05, pct_us(100.0 * (1.0 - std::pow(10.0, -k * 0.05))));
      if (top - steps * 0.05 > 1e-9) add(top, pct_us(100.0 * (1.0 - std::pow(10.0, -top))));
      double max_us = static_cast<double>(h.max()) / 1000.0;
      add(std::min(std::log10(n + 1), axis_top), max_us);
      for (double p : kMarked) {
        double x = nines(p);
        if (x > top + 1e-9) break;
        double us = pct_us(p);
        s.markers.push_back({{x, us}, fmt::format("{}: {:g}th percentile = {:.3f} µs", s.label, p, us)});
      }
      s.markers.push_back({s.points.back(), fmt::format("{}: max = {:.3f} µs ({} samples)", s.label, max_us, h.count())});
      c.series.push_back(std::move(s));
    }
  }
  c.x.label = "percentile (%)";
  c.x.lo = 0;
  c.x.hi = max_x;
  c.x.ticks.emplace_back(0, "0");
  for (double p : kMarked)
    if (nines(p) <= max_x + 1e-9) c.x.ticks.emplace_back(nines(p), fmt::format("{:g}", p));
  if (max_y > 0 && min_y < HUGE_VAL && max_y > 100 * min_y)
    c.y = log_axis(min_y, max_y, "completion latency (µs, log scale)");
  else
    c.y = linear_axis(max_y, "completion latency (µs)");
  return render(c);
}

std::string plots_index_html(const std::string& title) {
  std::string t = xml_escape(title);
  std::string o = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>rdmablk bench: {0}</title>\n"
      "<style>body {{ font-family: Helvetica, Arial, sans-serif; margin: 16px; }} "
      "object {{ display: block; width: 100%; max-width: 960px; margin: 0 0 24px; }}</style>\n"
      "</head>\n<body>\n<h1>rdmablk bench: {0}</h1>\n",
      t);
  for (auto [file, heading] : {std::pair{"iops.svg", "IOPS over time"}, std::pair{"bw.svg", "Bandwidth over time"},
                               std::pair{"clat.svg", "Completion latency percentiles"}})
    o += fmt::format("<h2>{1}</h2>\n<object type=\"image/svg+xml\" data=\"{0}\"><a href=\"{0}\">{0}</a></object>\n", file, heading);
  o += "</body>\n</html>\n";
  return o;
}

Result<std::vector<std::string>> write_plots(const std::string& dir, const std::vector<JobResult>& results,
                                             const std::string& job_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(fmt::format("cannot create plot directory {}: {}", dir, ec.message()), ec.value());
  std::string title = plot_title(results, job_file);
  std::vector<std::pair<std::string, std::string>> files = {{"iops.svg", iops_svg(results, title)},
                                                            {"bw.svg", bw_svg(results, title)},
                                                            {"clat.svg", clat_svg(results, title)},
                                                            {"index.html", plots_index_html(title)}};
  std::vector<std::string> written;
  for (const auto& [name, text] : files) {
    std::string path = (fs::path(dir) / name).string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (f) f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) {
      int err = errno ? errno : EIO;
      return make_error(fmt::format("cannot write {}: {}", path, std::strerror(err)), err);
    }
    written.push_back(std::move(path));
  }
  return written;
}

}  // namespace rdmablk::initiator::bench
