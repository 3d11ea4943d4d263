#include "render/html.hpp"

#include <cmath>
#include <cstdio>

#include "kv_chart_js.hpp"

namespace kv::html {

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

std::string num(const nlohmann::json& v, int digits) {
  if (v.is_number()) return num(v.get<double>(), digits);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "—";
  return v.dump();
}

std::string page_head(const std::string& title, bool charts) {
  std::string h = "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>" + esc(title) + "</title><style>"
                  "body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1500px}"
                  "table{border-collapse:collapse;font-size:13px;margin:.5em 0}"
                  "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}th{background:#eee}"
                  "td.n{text-align:right;font-variant-numeric:tabular-nums}"
                  ".pass,.identical{background:#e6f4e6}.fail,.error,.outside,.violation{background:#f9d6d5}"
                  ".unverifiable,.skip,.inside,.changes{background:#fff3cd}"
                  "code{font-size:12px}details{margin:.4em 0}summary{cursor:pointer;font-weight:600}"
                  ".chart{position:relative;width:min(100%,760px);height:340px;display:inline-block;margin:.5em}"
                  ".note{color:#555;font-size:13px;max-width:1100px}.bar{height:10px;border-radius:2px}"
                  ".banner{font-size:16px;padding:6px 10px;border-radius:4px;margin:.4em 0}code.copy{user-select:all}"
                  "table.glance{font-size:12px}table.glance small{color:#444}td.none{color:#888}h1{margin:.2em 0}</style>";
  if (charts) {
    // Chart.js 3.9.1 (MIT License, (c) Chart.js Contributors), from Debian's libjs-chart.js.
    h += "<script>";
    h += kChartJs;
    h += "</script>";
  }
  return h + "</head><body>\n";
}

std::string data_block(const nlohmann::json& data) {
  std::string s = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') o += "<\\/", ++i;
    else o += s[i];
  }
  return "<script type='application/json' id='kv-data'>" + o + "</script>\n";
}

std::string layout_probe() {
  return R"js(<script>
window.addEventListener('load', function () {
  var b = document.body, f = document.getElementById('first-screen');
  b.dataset.pagew = document.documentElement.scrollWidth;
  b.dataset.vieww = window.innerWidth;
  if (f) { var r = f.getBoundingClientRect(); b.dataset.firstw = Math.ceil(r.right); b.dataset.firsth = Math.ceil(r.bottom); }
});
</script>
)js";
}

std::string chart_script() {
  // Each chart: {canvas, type: "scatter"|"bar", title, x, y, logx, logy, stacked, labels,
  // datasets: [{label, data, color}]}. Animations are off so a canvas is painted at once.
  return R"js(<script>
(function () {
  var body = document.body, errors = 0;
  window.addEventListener('error', function () { errors++; body.dataset.errors = errors; });
  body.dataset.errors = 0;
  var data = JSON.parse(document.getElementById('kv-data').textContent);
  var drawn = 0, painted = 0, ticks = 0, tickDupes = 0;
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#17becf', '#bcbd22'];
  (data.charts || []).forEach(function (c) {
    var el = document.getElementById(c.canvas);
    if (!el) { errors++; return; }
    // Tick labels a person reads: powers of ten on log axes (1e-22, not 0.000...), three
    // significant digits or an exponent on linear ones.
    var fmt = function (v) {
      if (v === 0) return '0';
      var a = Math.abs(v);
      return (a < 1e-3 || a >= 1e5) ? v.toExponential(1).replace('.0e', 'e') : String(+v.toPrecision(3));
    };
    var logTick = function (v) {
      var e = Math.log10(v), r = Math.round(e);
      return Math.abs(e - r) < 1e-6 ? (r === 0 ? '1' : '1e' + r) : '';
    };
    var scale = function (title, log, stacked) {
      var type = log ? 'logarithmic' : (c.type === 'bar' && title === c.x ? 'category' : 'linear');
      var s = { type: type, stacked: !!stacked, title: { display: true, text: title } };
      if (type !== 'category') s.ticks = { callback: log ? logTick : fmt };
      return s;
    };
    var cfg = {
      type: c.type,
      data: { labels: c.labels, datasets: c.datasets.map(function (d, i) {
        var col = d.color || palette[i % palette.length];
        return { label: d.label, data: d.data, backgroundColor: d.hollow ? 'rgba(0,0,0,0)' : col, borderColor: col,
                 borderWidth: d.hollow ? 2 : 1,
                 pointStyle: d.point || 'circle', pointRadius: d.radius || 3, showLine: !!d.line };
      }) },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { title: { display: true, text: c.title } },
                 scales: { x: scale(c.x, c.logx, c.stacked), y: scale(c.y, c.logy, c.stacked) } }
    };
    var chart = new Chart(el, cfg);
    drawn++;
    // Every axis's printed tick labels must be distinct (the browser test reads the count).
    ['x', 'y'].forEach(function (k) {
      var sc = chart.scales[k];
      if (!sc || sc.type === 'category') return;
      var seen = {};
      sc.ticks.forEach(function (t) {
        var l = String(t.label === undefined ? '' : t.label);
        if (l === '') return;
        if (seen[l]) tickDupes++;
        seen[l] = true;
        ticks++;
      });
    });
    var px = el.getContext('2d').getImageData(0, 0, el.width, el.height).data, ink = 0;
    for (var k = 3; k < px.length; k += 4) if (px[k] !== 0) { ink++; }
    if (ink > 0) painted++;
  });
  body.dataset.charts = drawn;
  body.dataset.ticks = ticks;
  body.dataset.tickdupes = tickDupes;
  body.dataset.painted = painted;
  body.dataset.errors = errors;
})();
</script>
)js";
}

}  // namespace kv::html
