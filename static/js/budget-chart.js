/* The budget burn-down: draws, with uPlot (static/vendor), the money or GPU-eq-hours spent by
 * the end of each day of the month, a dashed projection from today to the month's end and the
 * budget as a horizontal line, from the JSON in the figure's data-budget-chart attribute (htmx
 * drops script elements from what it swaps in): the same figures as the table beside it.
 * Redrawn when htmx swaps the section.
 * No inline script and no eval: the site's Content-Security-Policy allows neither. */
(function () {
  "use strict";
  if (window.portalBudgetChart) { return; }
  window.portalBudgetChart = true;

  var DAY = 86400;

  function dayToSeconds(text) {
    var parts = text.split("-");
    return Date.UTC(+parts[0], +parts[1] - 1, +parts[2]) / 1000;
  }

  function secondsToDay(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 10);
  }

  function draw(container) {
    if (typeof uPlot === "undefined") { return; }
    var data = JSON.parse(container.getAttribute("data-budget-chart") || "{}");
    if (!data.days || !data.days.length) { return; }
    var budget = parseFloat(data.budget);
    var first = dayToSeconds(data.days[0]);
    var last = dayToSeconds(data.days[data.days.length - 1]);
    var end = dayToSeconds(data.month_end);
    var spentNow = parseFloat(data.spent[data.spent.length - 1]);
    var projected = parseFloat(data.projected);
    var x = [], spent = [], projection = [], line = [];
    for (var day = first, i = 0; day <= end; day += DAY, i++) {
      x.push(day);
      spent.push(i < data.spent.length ? parseFloat(data.spent[i]) : null);
      // The straight line from today's figure to the projection at the month's end.
      projection.push(day < last ? null :
        end === last ? spentNow : spentNow + (projected - spentNow) * (day - last) / (end - last));
      line.push(budget);
    }
    var options = {
      width: Math.max(320, container.clientWidth - 8),
      height: 260,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(max, budget) * 1.05]; } } },
      axes: [
        {
          incrs: [DAY, 2 * DAY, 7 * DAY, 14 * DAY],
          values: function (u, ticks) { return ticks.map(secondsToDay); },
        },
        { label: data.unit, size: 70 },
      ],
      series: [
        { label: "day" },
        { label: "spent", stroke: "#0b6e4f", width: 2, points: { show: true } },
        { label: "projected", stroke: "#b54708", width: 2, dash: [6, 4], spanGaps: true },
        { label: "budget", stroke: "#b42318", width: 1.5 },
      ],
    };
    new uPlot(options, [x, spent, projection, line], container);
    container.setAttribute("data-drawn", "true");
  }

  function drawAll() {
    var charts = document.querySelectorAll("[data-budget-chart]:not([data-drawn])");
    Array.prototype.forEach.call(charts, draw);
  }

  document.addEventListener("htmx:afterSettle", drawAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
