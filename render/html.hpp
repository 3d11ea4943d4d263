// Small pieces every HTML page kverify writes shares: escaping, number formatting, the
// page head with the inlined chart library, and the embedded data block charts read.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace kv::html {

/// Text escaped for HTML element content and attribute values.
std::string esc(const std::string& s);
/// A JSON value as short text: strings as they are, numbers with up to `digits`
/// significant digits, null (not recorded) as "—", "inf"/"nan" strings kept.
std::string num(const nlohmann::json& v, int digits = 3);
std::string num(double v, int digits = 3);
/// <!doctype html> up to <body>: a title, the shared stylesheet and, when `charts`,
/// Chart.js (from Debian's libjs-chart.js, embedded at build time) inlined.
std::string page_head(const std::string& title, bool charts);
/// The data charts read: a <script type="application/json" id="kv-data"> block, written so
/// no "</script" inside the data can end it early.
std::string data_block(const nlohmann::json& data);
/// The script that draws every chart described in the data block and records, on <body>,
/// data-charts (how many were drawn), data-painted (how many canvases hold pixels) and
/// data-errors (script errors seen), which the browser test reads.
std::string chart_script();
/// Records on <body>, once the page has loaded, what the browser test checks of its layout:
/// data-pagew (the page's scroll width) and data-vieww (the window's), and where an element
/// #first-screen exists, data-firstw and data-firsth (its right and bottom edges in px).
std::string layout_probe();

}  // namespace kv::html
