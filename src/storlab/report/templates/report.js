(function () {
  function key(td, numeric) {
    if (!td) return numeric ? NaN : "";
    var v = td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent;
    return numeric ? (v === "" ? NaN : parseFloat(v)) : v.toLowerCase();
  }
  function sortBy(table, th) {
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.classList.contains("num");
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(th.parentNode.children, function (h) {
      h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[idx], numeric), y = key(b.cells[idx], numeric);
      if (numeric) {
        if (isNaN(x) && isNaN(y)) return 0;
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return dir * (x - y);
      }
      return dir * x.localeCompare(y, undefined, {numeric: true});
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable th button").forEach(function (b) {
    b.addEventListener("click", function () {
      var th = b.parentNode;
      sortBy(th.closest("table"), th);
    });
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
})();
