// Every ironlun page with charts (the bench's report, the lab's pages):
// click a run's key to hide or show it in every chart, point at a key to
// bring its run forward; then record what the charts hold on
// <html data-report>, and once loaded how many resources the page fetched
// on <html data-fetches> (none: it is self-contained). Tests read both
// from the rendered page.
(function () {
  "use strict";
  var root = document.documentElement;
  var hidden = {};

  function each(selector, fn) {
    Array.prototype.forEach.call(document.querySelectorAll(selector), fn);
  }

  function apply() {
    each("g.run, .key", function (el) {
      el.classList.toggle("off", hidden[el.getAttribute("data-run")] === true);
    });
  }

  function focus(run) {
    document.body.classList.toggle("focusing", run !== null);
    each("g.run", function (el) {
      el.classList.toggle("focus", el.getAttribute("data-run") === run);
    });
  }

  each(".key", function (key) {
    var run = key.getAttribute("data-run");
    key.addEventListener("click", function () {
      hidden[run] = !hidden[run];
      apply();
    });
    key.addEventListener("mouseenter", function () { focus(run); });
    key.addEventListener("mouseleave", function () { focus(null); });
  });

  var charts = document.querySelectorAll("svg.chart");
  var lines = 0, points = 0, markers = 0, bars = 0, empty = 0;
  Array.prototype.forEach.call(charts, function (chart) {
    var n = 0;
    Array.prototype.forEach.call(chart.querySelectorAll("path.line"), function (p) {
      var k = (p.getAttribute("d").match(/[ML]/g) || []).length;
      lines += 1;
      points += k;
      n += k;
    });
    // A scatter has points without a path.
    var m = chart.querySelectorAll("circle.pt").length;
    markers += m;
    var b = chart.querySelectorAll("rect.bar").length;
    bars += b;
    if (n + m + b === 0) {
      empty += 1;
    }
  });
  root.setAttribute("data-report", "charts=" + charts.length + " lines=" + lines +
    " points=" + points + " markers=" + markers + " bars=" + bars + " empty=" + empty);

  window.addEventListener("load", function () {
    root.setAttribute("data-fetches", String(performance.getEntriesByType("resource").length));
  });
})();
