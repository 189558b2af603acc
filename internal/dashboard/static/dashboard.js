// talon dashboard: live updates over one server-sent event stream per tab, the fleet
// table's filter and sort, and the action forms. Plain JavaScript, no dependencies.
(() => {
  'use strict';
  const token = document.querySelector('meta[name="talon-token"]').content;
  const live = document.getElementById('live');
  const status = document.getElementById('live-status');
  const view = { sort: 'name', dir: 1 };

  // Fleet: filter by text and state, sort by a column; kept across live updates.
  const filter = document.getElementById('filter');
  const stateSelect = document.getElementById('state');
  const numeric = (v) => { const m = /^(\d+)\/(\d+)$/.exec(v || ''); return m ? Number(m[1]) / Math.max(1, Number(m[2])) : null; };
  function applyView() {
    const table = live && live.querySelector('table.fleet');
    if (!table) return;
    const text = filter ? filter.value.trim().toLowerCase() : '';
    const state = stateSelect ? stateSelect.value : '';
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    let shown = 0;
    for (const row of rows) {
      const match = (!state || row.dataset.state === state) && (!text || row.textContent.toLowerCase().includes(text));
      row.hidden = !match;
      if (match) shown++;
    }
    const attr = view.sort;
    rows.sort((a, b) => {
      const x = a.dataset[attr] || '', y = b.dataset[attr] || '';
      const nx = numeric(x), ny = numeric(y);
      const c = nx !== null && ny !== null ? nx - ny : x.localeCompare(y, undefined, { numeric: true });
      return c * view.dir || a.dataset.name.localeCompare(b.dataset.name);
    });
    for (const row of rows) body.appendChild(row);
    for (const th of table.tHead.querySelectorAll('th[data-sort]')) {
      th.setAttribute('aria-sort', th.dataset.sort === view.sort ? (view.dir > 0 ? 'ascending' : 'descending') : 'none');
    }
    const counter = table.querySelector('[data-shown]');
    if (counter) counter.textContent = String(shown);
  }
  if (filter) filter.addEventListener('input', applyView);
  if (stateSelect) stateSelect.addEventListener('change', applyView);
  document.addEventListener('click', (ev) => {
    const button = ev.target.closest('th[data-sort] button');
    if (!button) return;
    const key = button.parentElement.dataset.sort;
    view.dir = view.sort === key ? -view.dir : 1;
    view.sort = key;
    applyView();
  });

  // Live updates: the server says "change", the tab fetches the live part of the page.
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(location.pathname, { headers: { 'X-Talon-Fragment': '1' }, cache: 'no-store' });
      if (r.ok || r.status === 404) {
        const open = new Set(Array.from(live.querySelectorAll('details[open]')).map(pathOf));
        live.innerHTML = await r.text();
        for (const d of live.querySelectorAll('details')) if (open.has(pathOf(d))) d.open = true;
        live.dataset.updated = String(Date.now());
        applyView();
      }
    } catch (e) {
      status.textContent = 'Update failed: ' + e.message;
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
  // pathOf names a details element by the headings and rows around it, so that the
  // conditions a person opened stay open across updates.
  function pathOf(el) {
    const parts = [];
    for (let n = el; n && n !== live; n = n.parentElement) {
      if (n.dataset && n.dataset.machine) parts.push(n.dataset.machine);
      const h = n.querySelector && n.querySelector(':scope > h3');
      if (h) parts.push(h.textContent);
    }
    if (el.closest('tr.machine-conditions')) parts.push(el.closest('tr.machine-conditions').previousElementSibling.dataset.machine);
    return parts.join('|');
  }
  if (live && window.EventSource) {
    const events = new EventSource('/updates');
    let lost = false;
    events.addEventListener('change', refresh);
    events.onopen = () => { status.textContent = 'Live'; if (lost) { lost = false; refresh(); } };
    events.onerror = () => { lost = true; status.textContent = 'Reconnecting…'; };
  } else if (status) {
    status.textContent = '';
  }
  applyView();

  // Actions: posted with the page's token; the API server's answer is shown as it is.
  for (const form of document.querySelectorAll('form[data-action]')) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const out = form.querySelector('[data-result]');
      const button = form.querySelector('button[type="submit"]');
      out.className = 'result';
      out.textContent = 'Working…';
      button.disabled = true;
      try {
        const r = await fetch(form.action, {
          method: 'POST',
          headers: { 'X-Talon-Token': token },
          body: new URLSearchParams(new FormData(form)),
        });
        out.textContent = (await r.text()).trim();
        out.classList.add(r.ok ? 'ok' : 'error');
      } catch (e) {
        out.textContent = 'The dashboard did not answer: ' + e.message;
        out.classList.add('error');
      } finally {
        button.disabled = false;
      }
    });
  }
})();
