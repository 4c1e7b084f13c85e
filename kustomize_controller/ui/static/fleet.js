// The fleet page: filters, and rows replaced in place as the stream reports them.
(function () {
  'use strict';
  const tbody = document.getElementById('rows');
  const counts = document.getElementById('counts');
  const search = document.getElementById('search');
  const namespace = document.getElementById('namespace');
  const state = document.getElementById('state');
  const labels = document.getElementById('labels');
  const labelError = document.getElementById('label-error');
  const empty = document.getElementById('empty');
  let labelKeys = null;  // the keys the label selector matches (null: no selector)

  function visible(tr) {
    const d = tr.dataset;
    if (namespace.value && d.namespace !== namespace.value) return false;
    if (state.value && d.state !== state.value) return false;
    if (labelKeys !== null && !labelKeys.has(d.key)) return false;
    const text = search.value.trim().toLowerCase();
    return !text || tr.textContent.toLowerCase().includes(text);
  }

  function applyFilters() {
    let shown = 0;
    for (const tr of tbody.rows) {
      const show = visible(tr);
      tr.hidden = !show;
      if (show) shown += 1;
    }
    empty.hidden = shown > 0;
  }

  let pending = null;
  async function selectLabels() {
    const selector = labels.value.trim();
    if (!selector) {
      labelKeys = null;
      labelError.textContent = '';
      applyFilters();
      return;
    }
    const response = await fetch('/fleet/select?selector=' + encodeURIComponent(selector));
    const data = await response.json();
    if (data.error) {
      labelError.textContent = data.error;
      labelKeys = new Set();
    } else {
      labelError.textContent = '';
      labelKeys = new Set(data.keys);
    }
    applyFilters();
  }

  function placeRow(tr) {
    const key = tr.dataset.key;
    for (const other of tbody.rows) {
      if (other.dataset.key === key) {
        other.replaceWith(tr);
        return;
      }
      if (other.dataset.key > key) {
        tbody.insertBefore(tr, other);
        return;
      }
    }
    tbody.appendChild(tr);
  }

  function setNamespaces(names) {
    const chosen = namespace.value;
    const have = new Set(Array.from(namespace.options).map(function (o) { return o.value; }));
    for (const name of names) {
      if (!have.has(name)) {
        const option = document.createElement('option');
        option.value = name;
        option.textContent = name;
        namespace.appendChild(option);
      }
    }
    namespace.value = chosen;
  }

  function update(message) {
    if (message.full) tbody.replaceChildren();
    for (const [, html] of message.rows) {
      const tr = KC.fragment(html).firstElementChild;
      if (tr) placeRow(tr);
    }
    for (const key of message.deleted) {
      for (const tr of tbody.rows) {
        if (tr.dataset.key === key) tr.remove();
      }
    }
    counts.replaceChildren(KC.fragment(message.counts));
    setNamespaces(message.namespaces);
    if (labels.value.trim()) selectLabels(); else applyFilters();
  }

  search.addEventListener('input', applyFilters);
  namespace.addEventListener('change', applyFilters);
  state.addEventListener('change', applyFilters);
  labels.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(selectLabels, 200);
  });
  document.getElementById('filters').addEventListener('submit', function (event) { event.preventDefault(); });
  counts.addEventListener('click', function (event) {
    const button = event.target.closest('button.count');
    if (button) {
      state.value = button.dataset.state;
      applyFilters();
    }
  });

  applyFilters();
  performance.mark('fleet-rendered');  // the bench measures the first render up to here
  document.body.dataset.rendered = 'true';
  KC.live('fleet', update);
})();
