// Shared by every page: actions as POSTs carrying the CSRF token, the flash message, the live stream.
// No inline script anywhere: the content security policy allows scripts from this origin only.
(function () {
  'use strict';
  const csrf = document.querySelector('meta[name="csrf-token"]').content;

  function flash(text, ok) {
    const el = document.getElementById('flash');
    el.textContent = text;
    el.className = ok ? 'flash ok' : 'flash error';
    el.hidden = false;
  }

  async function act(form) {
    const button = form.querySelector('button');
    if (button) button.disabled = true;
    let data;
    try {
      const response = await fetch(form.action, {
        method: 'POST',
        body: new URLSearchParams(new FormData(form)),
        headers: {'X-CSRF-Token': csrf, 'Accept': 'application/json'},
        credentials: 'same-origin',
      });
      try {
        data = await response.json();
      } catch (err) {
        data = {ok: false, message: response.status + ' ' + response.statusText};
      }
    } catch (err) {
      data = {ok: false, message: 'the UI server did not answer: ' + err};
    }
    if (button) button.disabled = false;
    flash(data.message, data.ok);
    if (data.ok && form.dataset.then) window.location.assign(form.dataset.then);
  }

  document.addEventListener('submit', function (event) {
    const form = event.target;
    if (form.classList.contains('action')) {
      event.preventDefault();
      act(form);
    }
  });

  // One EventSource per page. The first message after a (re)connect is a full snapshot whenever the page's
  // version is older than the server's, so nothing is missed between the render and the stream.
  function live(topic, onMessage) {
    const badge = document.getElementById('live');
    const since = document.body.dataset.version;
    const source = new EventSource('/stream?topic=' + encodeURIComponent(topic) + '&since=' + since);
    source.onopen = function () { badge.classList.add('on'); };
    source.onerror = function () { badge.classList.remove('on'); };
    source.onmessage = function (event) {
      const message = JSON.parse(event.data);
      document.body.dataset.version = message.version;
      onMessage(message);
      document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    };
    return source;
  }

  // Server-rendered, escaped HTML fragments become nodes through a template element (never a script).
  function fragment(html) {
    const template = document.createElement('template');
    template.innerHTML = html.trim();
    return template.content;
  }

  window.KC = {csrf: csrf, flash: flash, live: live, fragment: fragment};
})();
