/* Usage charts: draws each chart of a usage page (and the chargeback page's spend) with uPlot (static/vendor) from the data the
 * page hands over in <script type="application/json" id="usage-data"> (Django's json_script),
 * or in the data-json attribute of the element with that id.
 * The data are the rows of the table beside the chart, so both show the same numbers.
 * No inline script and no eval: the site's Content-Security-Policy allows neither. */
(function () {
  "use strict";

  var COLOURS = { reserved: "#0b6e4f", requested: "#b54708", used: "#1570ef" };
  var FALLBACK = ["#0b6e4f", "#b54708", "#1570ef", "#6941c6", "#b42318"];

  var DAY = 86400;

  function secondsToDay(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 10);
  }

  function dayToSeconds(text) {
    var parts = text.split("-");
    return Date.UTC(+parts[0], +parts[1] - 1, +parts[2]) / 1000;
  }

  // Rows → one {title, x, series} per value of the split column (or one for all rows).
  function pivot(table) {
    var chart = table.chart;
    var at = function (name) { return table.columns.indexOf(name); };
    var xAt = at(chart.x);
    var splitAt = chart.split ? at(chart.split) : -1;
    var groups = [];
    var byName = {};
    table.rows.forEach(function (row) {
      var key = splitAt >= 0 ? row[splitAt] : "";
      var group = byName[key];
      if (!group) {
        group = byName[key] = { title: key, x: [], series: chart.series.map(function () { return []; }) };
        groups.push(group);
      }
      group.x.push(dayToSeconds(row[xAt]));
      chart.series.forEach(function (name, i) { group.series[i].push(parseFloat(row[at(name)])); });
    });
    return groups;
  }

  function draw(table, container) {
    var labels = {};
    table.columns.forEach(function (name, i) { labels[name] = table.labels[i]; });
    pivot(table).forEach(function (group) {
      var box = document.createElement("figure");
      box.className = "usage-chart-box";
      if (table.chart.split) {
        var caption = document.createElement("figcaption");
        caption.textContent = group.title === "—" ? "GPU model not known" : group.title;
        box.appendChild(caption);
      }
      container.appendChild(box);
      var options = {
        width: Math.max(320, container.clientWidth - 8),
        height: 240,
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
        scales: { x: { time: true } },
        // Daily points: day ticks, labelled as the table's dates are (UTC).
        axes: [
          {
            incrs: [DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY, 91 * DAY],
            values: function (u, ticks) { return ticks.map(secondsToDay); },
          },
          { label: "hours", size: 60 },
        ],
        series: [{ label: "day" }].concat(table.chart.series.map(function (name, i) {
          var colour = COLOURS[name] || FALLBACK[i % FALLBACK.length];
          return { label: labels[name], stroke: colour, width: 2, points: { show: true } };
        })),
      };
      new uPlot(options, [group.x].concat(group.series), box);
    });
    container.setAttribute("data-drawn", "true");
  }

  // Stacked bars (chart.kind "stacked-bars"): one bar per row (e.g. a month), a segment per
  // series from the first (bottom) up. uPlot paints series in order, so each series is drawn as
  // the running total up to it, the whole stack first and the bottom series last, on top; the
  // legend shows each series' own value. The x axis is the rows' labels, not a time scale.
  var BAR_COLOURS = ["#0b6e4f", "#1570ef", "#b54708", "#6941c6", "#b42318", "#0e9384",
    "#c11574", "#4e5ba6", "#854a0e"];
  var OTHER_COLOUR = "#98a2b3";

  function drawBars(table, container) {
    var chart = table.chart;
    var at = function (name) { return table.columns.indexOf(name); };
    var labels = {};
    table.columns.forEach(function (name, i) { labels[name] = table.labels[i]; });
    var names = table.rows.map(function (row) { return row[at(chart.x)]; });
    var xs = names.map(function (_, i) { return i; });
    var own = chart.series.map(function (name) {
      return table.rows.map(function (row) { return parseFloat(row[at(name)]) || 0; });
    });
    var running = xs.map(function () { return 0; });
    var stacked = own.map(function (values) {
      running = running.map(function (sum, i) { return sum + values[i]; });
      return running.slice();
    });
    var top = running.reduce(function (a, b) { return Math.max(a, b); }, 0);
    var order = own.map(function (_, i) { return own.length - 1 - i; });
    var bars = uPlot.paths.bars({ size: [0.6, 64] });
    var box = document.createElement("figure");
    box.className = "usage-chart-box";
    container.appendChild(box);
    var options = {
      width: Math.max(320, container.clientWidth - 8),
      height: 280,
      scales: {
        x: { time: false, range: [-0.5, Math.max(xs.length - 0.5, 0.5)] },
        y: { range: [0, top > 0 ? top * 1.1 : 1] },
      },
      axes: [
        {
          splits: function () { return xs; },
          values: function (u, ticks) { return ticks.map(function (t) { return names[t] || ""; }); },
        },
        { label: chart.unit || "", size: 70 },
      ],
      series: [{
        label: labels[chart.x],
        value: function (u, v) { return v == null ? "—" : names[v]; },
      }].concat(order.map(function (i) {
        var name = chart.series[i];
        var colour = name.charAt(0) === "_" ? OTHER_COLOUR : BAR_COLOURS[i % BAR_COLOURS.length];
        return {
          label: labels[name],
          stroke: colour,
          fill: colour,
          width: 1,
          paths: bars,
          points: { show: false },
          value: function (u, v, s, idx) { return idx == null ? "—" : own[i][idx].toFixed(2); },
        };
      })),
    };
    new uPlot(options, [xs].concat(order.map(function (i) { return stacked[i]; })), box);
    container.setAttribute("data-drawn", "true");
  }

  function drawAll() {
    // A <script type="application/json"> (json_script), or an element with the JSON in its
    // data-json attribute where htmx swaps the page part in (htmx drops swapped-in scripts).
    var source = document.getElementById("usage-data");
    if (!source || typeof uPlot === "undefined") { return; }
    var data = JSON.parse(source.tagName === "SCRIPT" ? source.textContent : source.dataset.json);
    data.tables.forEach(function (table) {
      var container = document.querySelector('[data-chart="' + table.name + '"]');
      if (!container || !table.rows.length || container.getAttribute("data-drawn")) { return; }
      if (table.chart.kind === "stacked-bars") {
        drawBars(table, container);
      } else {
        draw(table, container);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
  // A page part htmx swapped in (e.g. another month) brings its own data and empty charts.
  document.addEventListener("htmx:afterSettle", drawAll);
})();
