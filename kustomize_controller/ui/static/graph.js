// The dependsOn graph: Cytoscape with the dagre layout; namespaces are compound nodes that collapse.
(function () {
  'use strict';
  const container = document.getElementById('cy');
  const colours = {
    ready: '#2e7d32', reconciling: '#1565c0', failing: '#c62828', waiting: '#ef6c00', held: '#8e24aa',
    drifted: '#f9a825', suspended: '#757575', pending: '#90a4ae', missing: '#ffffff',
  };
  const style = [
    {selector: 'node', style: {
      'label': 'data(label)', 'font-size': 11, 'text-valign': 'center', 'text-halign': 'center',
      'width': function (n) { return Math.max(30, 7 * String(n.data('label')).length); }, 'height': 24, 'padding': '6px', 'shape': 'round-rectangle', 'color': '#fff',
      'background-color': function (n) { return colours[n.data('state')] || '#90a4ae'; },
      'border-width': 1, 'border-color': '#263238'}},
    {selector: 'node[state = "missing"]', style: {'color': '#c62828', 'border-style': 'dashed', 'border-color': '#c62828'}},
    {selector: 'node[?blocked]', style: {'border-width': 3, 'border-style': 'dashed', 'border-color': '#c62828'}},
    {selector: ':parent', style: {
      'label': 'data(label)', 'text-valign': 'top', 'text-halign': 'center', 'color': '#263238',
      'background-color': '#eceff1', 'background-opacity': 0.6, 'border-color': '#b0bec5', 'shape': 'round-rectangle'}},
    {selector: 'node[kind = "namespace"]', style: {'color': '#263238', 'background-color': '#eceff1'}},
    {selector: 'node.collapsed', style: {'label': 'data(collapsedLabel)', 'border-style': 'double', 'border-width': 4}},
    {selector: '.hidden', style: {'display': 'none'}},
    {selector: '.found', style: {'border-width': 4, 'border-color': '#ffd600'}},
    {selector: 'edge', style: {
      'width': 1.5, 'curve-style': 'bezier', 'target-arrow-shape': 'triangle',
      'line-color': '#90a4ae', 'target-arrow-color': '#90a4ae'}},
  ];
  let cy = null;
  let shape = '';

  function structure(elements) {
    return elements.map(function (e) { return e.data.id + '|' + (e.data.parent || ''); }).sort().join(',');
  }

  function layout() {
    cy.layout({name: 'dagre', rankDir: 'LR', nodeSep: 12, rankSep: 60, animate: false, fit: true, padding: 20}).run();
    if (cy.zoom() > 1.2) { cy.zoom(1.2); cy.center(); }
  }

  function collapse(ns, on) {
    const children = ns.children();
    children.toggleClass('hidden', on);
    ns.toggleClass('collapsed', on);
    ns.data('collapsedLabel', ns.data('label') + ' (' + children.length + ')');
    if (on) {  // an empty compound node has no size of its own
      ns.style({'width': 80, 'height': 30});
    } else {
      ns.removeStyle('width height');
    }
  }

  function draw(elements) {
    const next = structure(elements);
    if (cy === null || next !== shape) {
      if (cy !== null) cy.destroy();
      cy = cytoscape({container: container, elements: elements, style: style, minZoom: 0.05, maxZoom: 3});
      shape = next;
      cy.on('tap', 'node[kind = "kustomization"]', function (event) {
        const parts = event.target.id().split('/');
        window.location.assign('/ks/' + encodeURIComponent(parts[0]) + '/' + encodeURIComponent(parts[1]));
      });
      cy.on('tap', 'node[kind = "namespace"]', function (event) {
        collapse(event.target, !event.target.hasClass('collapsed'));
        layout();
      });
      if (cy.nodes('[kind = "kustomization"]').length > 150) {
        cy.nodes('[kind = "namespace"]').forEach(function (ns) { collapse(ns, true); });
      }
      layout();
    } else {
      for (const element of elements) {
        const node = cy.getElementById(element.data.id);
        if (node.nonempty()) node.data(element.data);
      }
    }
    container.dataset.nodes = String(cy.nodes('[kind = "kustomization"]').length);
    window.kcGraph = cy;
    document.body.dataset.graph = 'drawn';
  }

  async function load() {
    const response = await fetch(container.dataset.url);
    const data = await response.json();
    draw(data.elements);
  }

  document.getElementById('collapse').addEventListener('click', function () {
    cy.nodes('[kind = "namespace"]').forEach(function (ns) { collapse(ns, true); });
    layout();
  });
  document.getElementById('expand').addEventListener('click', function () {
    cy.nodes('[kind = "namespace"]').forEach(function (ns) { collapse(ns, false); });
    layout();
  });
  document.getElementById('find').addEventListener('input', function (event) {
    const text = event.target.value.trim().toLowerCase();
    cy.elements().removeClass('found');
    if (!text) return;
    const found = cy.nodes('[kind = "kustomization"], [kind = "missing"]').filter(function (n) {
      return n.id().toLowerCase().includes(text);
    });
    found.forEach(function (n) { if (n.parent().hasClass('collapsed')) collapse(n.parent(), false); });
    found.addClass('found');
    if (found.nonempty()) cy.fit(found, 60);
    container.dataset.found = String(found.length);
  });

  let timer = null;
  load();
  KC.live('fleet', function () {  // redraw at most every half second, whatever the rate of updates
    if (timer === null) timer = setTimeout(function () { timer = null; load(); }, 500);
  });
})();
