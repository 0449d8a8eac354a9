// Live filtering of the status page's rows. The page works without it: the
// form submits the same filters, which the server applies.
(function () {
  "use strict";
  var form = document.getElementById("filters");
  var table = document.getElementById("certs");
  if (!form || !table) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var total = rows.length;
  var rank = { ok: 0, none: 0, info: 1, notice: 2, warning: 3, page: 4, critical: 5 };
  var truncated = form.getAttribute("data-truncated") === "true";

  function has(list, v) { return (" " + list + " ").indexOf(" " + v + " ") >= 0; }

  function apply() {
    var tier = form.elements.tier.value, kind = form.elements.kind.value,
        source = form.elements.source.value,
        words = form.elements.q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (r) {
      var d = r.dataset;
      var ok = (!tier || rank[d.tier] >= rank[tier]) &&
        (!kind || has(d.kinds, kind)) &&
        (!source || has(d.sources, source)) &&
        words.every(function (w) { return d.search.indexOf(w) >= 0; });
      r.hidden = !ok;
      if (ok) { shown++; }
    });
    document.getElementById("shown").textContent = shown + " of " + total + " rows";
    document.getElementById("empty").hidden = shown !== 0;
    var params = new URLSearchParams(new FormData(form));
    params.forEach(function (v, k) { if (!v) { params.delete(k); } });
    var qs = params.toString();
    history.replaceState(null, "", qs ? "?" + qs : location.pathname);
  }

  if (truncated) { return; } // the server holds rows the page does not: keep submitting
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (e) { e.preventDefault(); apply(); });
})();
