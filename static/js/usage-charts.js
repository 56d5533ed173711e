/* Usage charts: draws each chart of a usage page with uPlot (static/vendor) from the data the
 * page hands over in <script type="application/json" id="usage-data"> (Django's json_script).
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

  function drawAll() {
    var source = document.getElementById("usage-data");
    if (!source || typeof uPlot === "undefined") { return; }
    var data = JSON.parse(source.textContent);
    data.tables.forEach(function (table) {
      var container = document.querySelector('[data-chart="' + table.name + '"]');
      if (container && table.rows.length) { draw(table, container); }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
