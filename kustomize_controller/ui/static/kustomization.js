// One Kustomization's page: live sections, the inventory's health read on demand.
(function () {
  'use strict';
  const inventory = document.getElementById('inventory');
  let digest = inventory.dataset.digest;

  async function loadInventory() {
    const response = await fetch(inventory.dataset.url);
    inventory.replaceChildren(KC.fragment(await response.text()));
    inventory.dataset.loaded = 'true';
  }

  function update(message) {
    if (message.gone) {
      KC.flash('This Kustomization was deleted.', false);
      return;
    }
    for (const [name, html] of Object.entries(message.sections)) {
      const section = document.getElementById('sec-' + name);
      if (section) section.replaceChildren(KC.fragment(html));
    }
    document.getElementById('suspend-form').hidden = message.suspended;
    document.getElementById('resume-form').hidden = !message.suspended;
    if (message.inventory !== digest) {
      digest = message.inventory;
      loadInventory();
    }
  }

  document.getElementById('refresh-inventory').addEventListener('click', loadInventory);
  loadInventory();
  KC.live(document.body.dataset.topic, update);
})();
