// queen-node dashboard. Plain JavaScript, no build step, nothing loaded from
// elsewhere. Every number on the page comes from the node's own HTTP API
// (the node that served this page); the page only arranges them. Pages are
// hash routes (#/cluster, #/queues, ...); each has a refresh() that reads
// the API again every REFRESH_MS while the tab is visible.
'use strict';
(function () {
  const REFRESH_MS = 5000;
  const TOKEN_KEY = 'queen.dashboard.token';
  const TENANT_KEY = 'queen.dashboard.tenant'; // localStorage: the tenant picked
  const TENANT_HEADER = 'x-queen-tenant';
  // The API lives at the node's root, wherever the node is mounted.
  const ROOT = location.pathname.replace(/\/dashboard(\/.*)?$/, '');
  // A consumer group is shown as lagging when its oldest pending message
  // waited this long (seconds). The node's own rule is 300 (the groups
  // list's state); ?lagSeconds=N in the page's URL changes it here.
  const LAG_SECONDS = Math.max(0, parseInt(new URLSearchParams(location.search).get('lagSeconds') || '300', 10) || 0);

  const $ = (sel, root) => (root || document).querySelector(sel);
  const esc = (s) => String(s == null ? '' : s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const n = (v) => (v == null ? '—' : Number(v).toLocaleString('en-US'));
  const time = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 19) + 'Z' : '—');
  const hhmm = (iso) => new Date(iso).toISOString().slice(11, 16);
  const dur = (s) => {
    if (s == null) return '—';
    s = Math.round(s);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  };
  const enc = encodeURIComponent;

  // ---- the token and what it allows -----------------------------------
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  function claimsOf(tok) {
    try {
      let p = tok.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      while (p.length % 4) p += '=';
      return JSON.parse(decodeURIComponent(Array.from(atob(p), (c) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0')).join('')));
    } catch (e) { return null; }
  }
  // The roles a token names (claims role and roles, the node's defaults).
  // Only a hint for what to show: the node decides every call.
  function access() {
    const tok = token();
    if (!tok) return { label: 'no token', read: true, write: true, admin: true, token: false };
    const c = claimsOf(tok) || {};
    const roles = [].concat(c.role || [], Array.isArray(c.roles) ? c.roles : []);
    const admin = roles.includes('admin');
    const write = admin || roles.includes('read-write');
    const read = write || roles.includes('read-only');
    const label = admin ? 'admin' : write ? 'read-write' : read ? 'read-only' : roles.includes('write-only') ? 'write-only' : 'no role';
    return { label, read, write, admin, token: true, sub: c.sub };
  }

  // ---- the API -----------------------------------------------------------
  class APIError extends Error {
    constructor(status, body, method, path) {
      super((body && body.error) || ('HTTP ' + status));
      this.status = status; this.body = body; this.method = method; this.path = path;
    }
  }
  // api is the one way the page calls the node: the token, and the tenant
  // picked (when the node reads the header for this token; opts.tenant
  // overrides it, '' = none).
  async function api(method, path, body, opts) {
    const headers = { Accept: 'application/json' };
    const tok = token();
    if (tok) headers.Authorization = 'Bearer ' + tok;
    const ten = opts && opts.tenant !== undefined ? opts.tenant : tenantHeader();
    if (ten) headers[TENANT_HEADER] = ten;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(ROOT + path, { method, headers, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = null;
    if (text) { try { data = JSON.parse(text); } catch (e) { data = { error: text }; } }
    if (!res.ok) throw new APIError(res.status, data, method, path);
    return data;
  }
  const get = (path) => api('GET', path);
  // health is GET /health, whose 503 (settling, damaged) carries the same
  // view.
  async function health(opts) {
    try {
      return await api('GET', '/health', undefined, opts);
    } catch (err) {
      if (err instanceof APIError && err.status === 503 && err.body && err.body.nodeId) return err.body;
      throw err;
    }
  }

  // ---- the tenant -----------------------------------------------------------
  // A token whose tenant claim names a tenant fixes it: no header overrides
  // a claim. Otherwise the node reads x-queen-tenant when the token's claim
  // is "*" (an admin of every tenant) or when it runs with
  // --trust-tenant-header, which its public /health's tenant.headerTrusted
  // shows. Then, for an
  // operator (GET /api/v1/system/tenants answers), a select lists every
  // tenant; the choice is kept in localStorage and api() sends it on every
  // call.
  const tenancy = { claim: '', every: false, pick: false, list: [], health: null };
  const chosenTenant = () => localStorage.getItem(TENANT_KEY) || '';
  // A "*" token with no pick names the default tenant outright: without a
  // header the node would list every tenant's rows on some routes and read
  // the default tenant on others.
  function tenantHeader() {
    if (!tenancy.pick) return '';
    return chosenTenant() || (tenancy.every ? 'default' : '');
  }
  // The tenant the page looks at, and its Raft group when known.
  function viewedTenant() {
    const h = tenancy.health && tenancy.health.tenant;
    let name;
    if (tenancy.claim && !tenancy.every) name = tenancy.claim;
    else if (tenancy.every) name = chosenTenant() || 'default';
    else name = h ? h.name : (tenantHeader() || 'default');
    let group = h && h.name === name ? h.group : undefined;
    const row = tenancy.list.find((t) => t.name === name);
    if (row) group = row.group;
    return { name, group };
  }
  async function loadTenants() {
    const r = await api('GET', '/api/v1/system/tenants', undefined, { tenant: '' });
    if (!r || !Array.isArray(r.tenants)) throw new Error('no tenants in the answer');
    tenancy.list = r.tenants.map((t) => ({ name: t.tenant, group: t.group }));
  }
  async function loadTenancy() {
    const c = claimsOf(token()) || {};
    tenancy.claim = typeof c.tenant === 'string' ? c.tenant : '';
    tenancy.every = tenancy.claim === '*';
    tenancy.pick = false;
    tenancy.list = [];
    if (!tenancy.claim || tenancy.every) {
      let listed = true;
      try { await loadTenants(); } catch (e) { listed = false; }
      if (listed) {
        if (tenancy.every) {
          tenancy.pick = true;
        } else {
          // Does the node read the header? /health's tenant says.
          try { const h = await health({ tenant: '' }); tenancy.pick = !!(h.tenant && h.tenant.headerTrusted); } catch (e) { /* stays false */ }
        }
      }
    }
    try { noteHealth(await health()); } catch (e) { showTenancy(); }
  }
  function showTenancy() {
    const box = $('#tenancy');
    const v = viewedTenant();
    // Where the tenant comes from when the token decides: its claim names
    // it, or names every tenant ("*": the page picks).
    const src = tenancy.every ? 'token: every tenant' : tenancy.claim ? 'token' : '';
    const label = `<span class="tenant" data-testid="tenant" title="the tenant this page shows">tenant <b data-testid="tenant-name">${esc(v.name)}</b>${v.group != null ? ` · group <span data-testid="tenant-group">${esc(v.group)}</span>` : ''}${src ? ` <span data-testid="tenant-source">(${src})</span>` : ''}</span>`;
    let html = label;
    if (tenancy.pick) {
      const chosen = chosenTenant();
      // No header is the default tenant (the pages' status routes read one
      // tenant, also for a "*" token).
      const names = tenancy.list.map((t) => t.name).filter((x) => x !== 'default');
      if (chosen && !names.includes(chosen)) names.push(chosen);
      const opts = ['<option value="">default</option>'].concat(
        names.map((x) => `<option value="${esc(x)}" ${x === chosen ? 'selected' : ''}>${esc(x)}</option>`));
      html = `<label for="tenant-pick" class="sr">Tenant</label><select id="tenant-pick" data-testid="tenant-picker" title="sent as ${TENANT_HEADER} on every call">${opts.join('')}</select>` + label;
    }
    // Drawn again only when it changed: an open select stays open across
    // refreshes.
    if (box.dataset.drawn !== html) { box.innerHTML = html; box.dataset.drawn = html; }
  }
  // noteHealth takes what /health said: the serving node and the tenant.
  function noteHealth(h) {
    tenancy.health = h;
    $('#served').textContent = 'served by ' + (h.nodeId || '?') + ' (' + ((h.raft && h.raft.role) || '?') + ')';
    showTenancy();
  }

  // ---- messages to the operator -----------------------------------------
  function explain(err) {
    if (!(err instanceof APIError)) return String(err && err.message || err);
    const what = err.method + ' ' + err.path.split('?')[0];
    if (err.status === 401) return '401 ' + err.message + ' — ' + what + '. Paste a token above.';
    if (err.status === 403) return '403 ' + err.message + ' — ' + what + ' needs a role your token (' + access().label + ') does not have.';
    const b = err.body || {};
    const code = b.code ? ' (' + b.code + ')' : '';
    const detail = b.detail || b.reason ? ': ' + (b.detail || b.reason) : '';
    return err.status + ' ' + err.message + code + detail + ' — ' + what;
  }
  function banner(msg, info) {
    const b = $('#banner');
    b.dataset.fromRefresh = '';
    if (!msg) { b.hidden = true; b.textContent = ''; return; }
    b.hidden = false; b.textContent = msg; b.className = 'banner' + (info ? ' info' : '');
  }
  function failed(err) { banner(explain(err)); }

  // ---- small pieces of HTML ---------------------------------------------
  const testid = (s) => String(s).replace(/[^A-Za-z0-9_.-]/g, '_');
  const card = (k, v, id, cls) => `<div class="card ${cls || ''}"><div class="k">${esc(k)}</div><div class="v" data-testid="${esc(id)}">${v}</div></div>`;
  const table = (head, rows, empty) => `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>${rows.join('') || `<tr><td colspan="20" class="muted">${esc(empty || 'nothing')}</td></tr>`}</tbody></table></div>`;
  const tag = (text, cls) => `<span class="tag ${cls || ''}">${esc(text)}</span>`;

  // lineChart draws series of numbers over time as inline SVG.
  function lineChart(labels, series, title) {
    const W = 900, H = 220, L = 48, R = 12, T = 10, B = 22;
    const count = labels.length;
    const top = Math.max(1, ...series.flatMap((s) => s.values));
    const x = (i) => L + (count <= 1 ? 0 : (i * (W - L - R)) / (count - 1));
    const y = (v) => T + (H - T - B) * (1 - v / top);
    let svg = `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">`;
    for (const f of [0, 0.5, 1]) {
      const v = top * f;
      svg += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/><text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${esc(Number.isInteger(v) ? n(v) : v.toFixed(1))}</text>`;
    }
    svg += `<line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/>`;
    if (count) {
      for (const i of [0, Math.floor((count - 1) / 2), count - 1]) {
        svg += `<text x="${x(i)}" y="${H - 6}" text-anchor="${i === 0 ? 'start' : i === count - 1 ? 'end' : 'middle'}">${esc(hhmm(labels[i]))}</text>`;
      }
    }
    for (const s of series) {
      svg += `<polyline class="${s.cls}" points="${s.values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ')}"><title>${esc(s.name)}</title></polyline>`;
    }
    svg += '</svg>';
    const legend = series.map((s) => `<span><i class="${s.cls}"></i>${esc(s.name)} (${n(s.values.reduce((a, b) => a + b, 0))})</span>`).join('');
    return svg + `<div class="legend">${legend}</div>`;
  }

  // Two-step buttons: the first click arms (for 5 s), the second acts.
  // Their state lives here, by key, so a refresh that redraws the table
  // keeps an armed button armed.
  const armed = new Map();
  function actBtn(key, label, confirm, cls) {
    const on = armed.has(key) && armed.get(key) > Date.now();
    return `<button type="button" data-act="${esc(key)}" data-testid="${esc(testid(key))}" class="${on ? 'armed' : ''} ${cls || ''}" data-label="${esc(label)}" data-confirm="${esc(confirm)}">${esc(on ? confirm : label)}</button>`;
  }
  // onActions wires the two-step buttons of a container to handlers by key
  // prefix ("seek-end:group:queue" → handlers['seek-end']).
  function onActions(root, handlers) {
    root.addEventListener('click', async (ev) => {
      const b = ev.target.closest('button[data-act]');
      if (!b || !root.contains(b)) return;
      const key = b.dataset.act;
      if (!(armed.get(key) > Date.now())) {
        armed.set(key, Date.now() + 5000);
        b.classList.add('armed'); b.textContent = b.dataset.confirm;
        setTimeout(() => { if (!(armed.get(key) > Date.now())) { b.classList.remove('armed'); b.textContent = b.dataset.label; } }, 5100);
        return;
      }
      armed.delete(key);
      b.disabled = true; b.classList.remove('armed'); b.textContent = b.dataset.label;
      const [kind, ...args] = key.split('\u001f');
      try {
        const msg = await handlers[kind](...args);
        banner(msg || 'done', true);
      } catch (err) { failed(err); }
      b.disabled = false;
      refreshNow();
    });
  }
  const keyOf = (...parts) => parts.join('\u001f');

  // ---- pages ---------------------------------------------------------------
  const pages = {};

  // The landing page: what needs attention, the nodes, the throughput.
  pages.cluster = (root) => {
    root.innerHTML = `<h1>Cluster</h1><div id="c-cards" class="cards"></div>
      <section class="panel"><h2>Needs attention</h2><ul class="incidents" id="c-incidents" data-testid="incidents"></ul></section>
      <section class="panel"><h2>Nodes</h2><div id="c-nodes"></div></section>
      <section class="panel" data-testid="raft-groups"><h2>Raft groups</h2><div id="c-groups"></div></section>
      <section class="panel" id="c-place-panel" data-testid="placements" hidden><h2>Tenant placement</h2><div id="c-place"></div></section>
      <section class="panel"><h2>Messages per minute, last hour</h2><div id="c-chart"></div></section>`;
    return {
      async refresh() {
        // The tenants list too, for an operator (new tenants appear in the
        // picker and the groups' rows).
        const gen = generation;
        const [st, h] = await Promise.all([get('/api/v1/status'), health(), tenancy.list.length ? loadTenants().catch(() => {}) : null]);
        if (gen === generation) noteHealth(h); // not an answer for a tenant since left
        const c = st.cluster, dlq = st.deadLetterQueue;
        const lagging = laggingGroups(await get('/api/v1/consumer-groups'));
        const up = c.nodes.filter((x) => x.reachable).length;
        const leader = c.nodes.find((x) => x.role === 'leader');
        $('#c-cards', root).innerHTML =
          card('Nodes up', `${up}/${c.nodes.length}`, 'nodes-up', up < c.nodes.length ? 'bad' : '') +
          card('Leader', esc(c.leader.id || 'none'), 'leader', c.leader.id ? '' : 'bad') +
          card('Term', n(c.term), 'term') +
          card('Queues', n(st.queues.length), 'queue-count') +
          card('Pending (queue mode)', n(st.messages.pending), 'pending-total') +
          card('Processing', n(st.messages.processing), 'processing-total') +
          card('Dead letters', n(dlq.totalMessages), 'dlq-total', dlq.totalMessages ? 'warn' : '') +
          card('Lagging groups', n(lagging.length), 'lagging-count', lagging.length ? 'warn' : '');
        const items = [];
        for (const x of c.nodes.filter((x) => !x.reachable)) {
          items.push(`<li class="bad" data-testid="incident-node-down-${esc(testid(x.id))}">Node <b>${esc(x.id)}</b> does not answer${x.error ? ': <span class="small">' + esc(x.error) + '</span>' : ''}. ${up} of ${c.nodes.length} nodes serve; a majority (${Math.floor(c.nodes.length / 2) + 1}) is needed for writes.</li>`);
        }
        for (const x of c.nodes.filter((x) => x.reachable && x.damage)) {
          items.push(`<li class="bad" data-testid="incident-node-damaged-${esc(testid(x.id))}">Node <b>${esc(x.id)}</b> found its own files damaged and serves nothing damaged: <span class="small">${esc(x.damage)}</span>. ${x.resync ? `It is rebuilding itself from the leader: <span class="small">${esc(x.resync)}</span>.` : 'A node of a cluster rebuilds itself from the others; a node alone needs a backup restored.'}</li>`);
        }
        for (const g of lagging) {
          items.push(`<li data-testid="incident-lagging-${esc(testid(g.name + '-' + g.queueName))}">Consumer group <b>${esc(g.name)}</b> on <a href="#/queue/${enc(g.queueName)}">${esc(g.queueName)}</a> is behind: <b>${n(g.pendingMessages)}</b> pending, the oldest waited ${dur(g.maxTimeLag)}. <a href="#/groups">Seek or delete</a></li>`);
        }
        if (dlq.totalMessages) {
          const sigs = dlq.topErrors.slice(0, 3).map((s) => `<li class="small">${n(s.count)} × <code>${esc(s.signature)}</code></li>`).join('');
          items.push(`<li class="bad" data-testid="incident-dlq"><b>${n(dlq.totalMessages)}</b> dead letters in ${n(dlq.affectedPartitions)} partitions, <b data-testid="dlq-signatures">${n(dlq.topErrors.length)}</b> kinds of error. <a href="#/dlq">Replay or purge</a><ul>${sigs}</ul></li>`);
        }
        if (!items.length) items.push('<li class="ok">Nothing: every node answers, no group lags, no dead letters.</li>');
        $('#c-incidents', root).innerHTML = items.join('');
        const rows = c.nodes.map((x) => `<tr data-node="${esc(x.id)}" data-testid="node-${esc(testid(x.id))}" class="${x.reachable ? '' : 'down'}">
          <td>${esc(x.id)}${x.self ? ' <span class="tag">serving</span>' : ''}</td>
          <td data-col="role">${x.role === 'leader' ? tag('leader', 'leader') : esc(x.role)}</td>
          <td data-col="state">${x.reachable ? tag(x.status || 'up', x.status === 'healthy' ? 'ok' : x.status === 'damaged' ? 'bad' : 'warn') : tag('unreachable', 'bad')}</td>
          <td class="n" data-col="term">${x.reachable ? n(x.term) : '—'}</td>
          <td class="n" data-col="applied">${x.reachable ? n(x.applied) : '—'}</td>
          <td class="n" data-col="commit">${x.reachable ? n(x.commit) : '—'}</td>
          <td class="n" data-col="lag">${x.reachable ? n(x.lag) : '—'}</td>
          <td class="n" data-col="behind">${x.reachable ? n(x.behind) : '—'}</td>
          <td class="hide-s small">${esc(x.httpAddr)}${x.voter ? '' : ' (non-voter)'}</td></tr>`);
        $('#c-nodes', root).innerHTML = table('<th>node</th><th>role</th><th>state</th><th class="n">term</th><th class="n">applied</th><th class="n">commit</th><th class="n" title="commit − applied on that node">lag</th><th class="n" title="behind the highest applied index">behind</th><th class="hide-s">address</th>', rows) +
          '<p class="small muted">Each node reports its own role, term and indexes; the serving node asks the others. lag = commit − applied on that node; behind = entries behind the most advanced node.' +
          ((h.groups || []).length > 1 ? ' With several Raft groups these are group 0\'s.' : '') + '</p>';
        groupsPanel(root, h);
        const tp = st.throughput;
        $('#c-chart', root).innerHTML = lineChart(tp.map((p) => p.timestamp), [
          { name: 'pushed', cls: 's-in', values: tp.map((p) => p.ingested) },
          { name: 'consumed', cls: 's-out', values: tp.map((p) => p.processed) },
          { name: 'failed', cls: 's-fail', values: tp.map((p) => p.failed) },
          { name: 'dead-lettered', cls: 's-dlq', values: tp.map((p) => p.deadLettered) }], 'messages per minute');
        footer(st.counts);
      },
    };
  };

  // groupsPanel draws /health's groups (this node's view of each Raft
  // group) and its placement table (tenants pinned or placed at their first
  // write).
  function groupsPanel(root, h) {
    const groups = h.groups || [];
    const mine = viewedTenant();
    const held = {};
    for (const t of tenancy.list) (held[t.group] = held[t.group] || []).push(t.name);
    const rows = groups.map((g) => `<tr data-testid="raft-group-${esc(g.group)}" class="${g.group === mine.group ? 'sel' : ''}">
      <td data-col="group">${esc(g.group)}</td>
      <td data-col="role">${g.role === 'leader' ? tag('leader', 'leader') : esc(g.role)}</td>
      <td class="n" data-col="term">${n(g.term)}</td><td class="n" data-col="applied">${n(g.applied)}</td>
      <td class="n" data-col="commit">${n(g.commit)}</td><td class="n" data-col="lag">${n(Math.max(0, (g.commit || 0) - (g.applied || 0)))}</td>
      <td data-col="leader">${g.leader ? esc(g.leader) : tag('none', 'bad')}</td>
      <td class="hide-s small" data-col="tenants">${g.group === mine.group ? tag('this page\'s tenant', 'leader') + ' ' : ''}${esc((held[g.group] || []).join(', '))}</td></tr>`);
    $('#c-groups', root).innerHTML = table('<th>group</th><th>this node\'s role</th><th class="n">term</th><th class="n">applied</th><th class="n">commit</th><th class="n" title="commit − applied on this node">lag</th><th>leader</th><th class="hide-s">tenants</th>', rows, 'this node names no groups') +
      `<p class="small muted">${n(groups.length)} Raft ${groups.length === 1 ? 'group' : 'groups'}, as node ${esc(h.nodeId || '?')} (the serving node) sees each. A tenant lives in one group; its requests go to that group's leader.${tenancy.list.length ? '' : ' The tenants column needs an operator\'s token.'}</p>`;
    const place = h.placements || [];
    $('#c-place-panel', root).hidden = !place.length;
    $('#c-place', root).innerHTML = place.length ? table('<th>tenant</th><th>group</th><th>placed</th><th>data</th>',
      place.map((p) => `<tr data-testid="placement-${esc(testid(p.tenant))}"><td data-col="tenant">${esc(p.tenant)}</td><td data-col="group">${esc(p.group)}</td>
        <td data-col="how">${p.pinned ? tag('pinned', 'warn') : tag('first write')}</td><td data-col="written">${p.written ? 'written' : tag('none yet')}</td></tr>`)) +
      '<p class="small muted">A tenant not listed lives where the hash of its name says (the default tenant in group 0). A pin holds only before the tenant\'s first write.</p>' : '';
  }

  function laggingGroups(groups) {
    return groups.filter((g) => g.pendingMessages > 0 && g.maxTimeLag >= LAG_SECONDS);
  }

  function footer(counts) {
    const since = counts && counts.since ? 'since ' + time(counts.since) + ' (its last restart)' : 'since the log began';
    $('#foot').textContent = counts
      ? `State (queues, messages, groups, dead letters) is the cluster's, read linearizably. Rates are node ${counts.countedBy}'s own counts of the entries it applied, ${since}.`
      : '';
  }

  pages.queues = (root) => {
    root.innerHTML = '<h1>Queues</h1><section class="panel" id="q-list"></section>';
    return {
      async refresh() {
        const res = await get('/api/v1/status/queues?limit=1000');
        const rows = res.queues.map((q) => `<tr data-testid="queue-${esc(testid(q.name))}"><td><a href="#/queue/${enc(q.name)}">${esc(q.name)}</a></td>
          <td class="hide-s">${esc(q.namespace || '')}${q.task ? ' / ' + esc(q.task) : ''}</td><td class="n">${n(q.partitions)}</td>
          <td class="n" data-col="total">${n(q.messages.total)}</td><td class="n" data-col="pending">${n(q.messages.pending)}</td>
          <td class="n" data-col="processing">${n(q.messages.processing)}</td><td class="n hide-s" data-col="completed">${n(q.messages.completed)}</td>
          <td class="n" data-col="deadLetter">${n(q.messages.deadLetter)}</td><td class="n">${dur(q.lag.seconds)}</td></tr>`);
        $('#q-list', root).innerHTML = table('<th>queue</th><th class="hide-s">namespace / task</th><th class="n">partitions</th><th class="n">total</th><th class="n">pending</th><th class="n">processing</th><th class="n hide-s">completed</th><th class="n">dead letters</th><th class="n">oldest pending</th>', rows, 'no queues') +
          `<p class="small muted">${n(res.pagination.total)} queues. Counts are queue mode's (spec §4.8); groups have their own positions on the groups page.</p>`;
      },
    };
  };

  pages.queue = (root, args) => {
    const name = args[0] || '';
    root.innerHTML = `<h1>Queue <span data-testid="queue-name">${esc(name)}</span></h1><div class="cards" id="qd-cards"></div>
      <section class="panel"><h2>Messages per minute, last hour</h2><div id="qd-chart"></div></section>
      <section class="panel"><h2>Partitions</h2><div id="qd-parts"></div></section>
      <section class="panel"><h2>Consumer groups</h2><div id="qd-groups"></div></section>
      <section class="panel"><h2>Configuration</h2><pre id="qd-config"></pre></section>`;
    return {
      async refresh() {
        const [q, depth, an, groups] = await Promise.all([
          get('/api/v1/status/queues/' + enc(name)),
          get('/api/v1/resources/queues/' + enc(name) + '/depth'),
          get('/api/v1/status/analytics?interval=minute&queue=' + enc(name)),
          get('/api/v1/consumer-groups')]);
        const t = q.totals.messages;
        $('#qd-cards', root).innerHTML = card('Partitions', n(q.totals.partitions), 'q-partitions') + card('Total', n(t.total), 'q-total') +
          card('Pending (queue mode)', n(t.pending), 'q-pending') + card('Ready now', n(depth.ready), 'q-ready') + card('Processing', n(t.processing), 'q-processing') +
          card('Completed', n(t.completed), 'q-completed') + card('Dead letters', n(t.deadLetter), 'q-dlq', t.deadLetter ? 'warn' : '');
        const tp = an.throughput.timeSeries;
        $('#qd-chart', root).innerHTML = lineChart(tp.map((p) => p.timestamp), [
          { name: 'pushed', cls: 's-in', values: tp.map((p) => p.ingested) },
          { name: 'consumed', cls: 's-out', values: tp.map((p) => p.processed) },
          { name: 'failed', cls: 's-fail', values: tp.map((p) => p.failed) },
          { name: 'dead-lettered', cls: 's-dlq', values: tp.map((p) => p.deadLettered) }], 'messages per minute of ' + name);
        const dp = {};
        for (const p of depth.partitions) dp[p.partition] = p;
        $('#qd-parts', root).innerHTML = table('<th>partition</th><th class="n">total</th><th class="n">pending</th><th class="n">ready</th><th class="n">processing</th><th class="n">leases</th><th class="hide-s">oldest</th><th class="hide-s">newest</th><th>id</th>',
          q.partitions.map((p) => `<tr><td>${esc(p.name)}</td><td class="n">${n(p.messages.total)}</td><td class="n">${n(p.messages.pending)}</td>
            <td class="n">${n(dp[p.name] ? dp[p.name].ready : null)}</td><td class="n">${n(p.messages.processing)}</td><td class="n">${n(p.activeLeases)}</td>
            <td class="hide-s small">${time(p.oldestMessage)}</td><td class="hide-s small">${time(p.newestMessage)}</td><td class="small muted">${esc(p.id)}</td></tr>`));
        $('#qd-groups', root).innerHTML = groupsTable(groups.filter((g) => g.queueName === name), false);
        $('#qd-config', root).textContent = JSON.stringify(q.queue.options, null, 2);
        footer(an.counts);
      },
    };
  };

  function groupsTable(groups, withActions) {
    const acc = access();
    const rows = groups.map((g) => {
      const lag = g.pendingMessages > 0 && g.maxTimeLag >= LAG_SECONDS;
      let actions = '';
      if (withActions) {
        if (acc.write) {
          actions += actBtn(keyOf('seek-end', g.name, g.queueName), 'Seek to end', 'Confirm: skip ' + n(g.pendingMessages));
          actions += actBtn(keyOf('seek-time', g.name, g.queueName), 'Rewind to time', 'Confirm rewind');
        }
        if (acc.admin) actions += actBtn(keyOf('delete', g.name, g.queueName), 'Delete', 'Confirm delete', 'admin');
      }
      return `<tr data-testid="group-${esc(testid(g.name + '-' + g.queueName))}" class="${lag ? 'sel' : ''}"><td>${esc(g.name)}</td><td><a href="#/queue/${enc(g.queueName)}">${esc(g.queueName)}</a></td>
        <td class="n">${n(g.members)}</td><td class="n">${n(g.partitionsWithLag)}</td><td class="n" data-col="pending">${n(g.pendingMessages)}</td>
        <td class="n" data-col="lag">${dur(g.maxTimeLag)}</td><td>${tag(lag ? 'lagging' : g.state, lag || g.state === 'Lagging' ? 'warn' : g.state === 'Dead' ? 'bad' : 'ok')}</td>
        <td class="hide-s small">${esc(g.subscriptionMode || '')}</td>${withActions ? `<td><div class="actions">${actions || '<span class="muted small">read-only</span>'}</div></td>` : ''}</tr>`;
    });
    return table(`<th>group</th><th>queue</th><th class="n">partitions</th><th class="n">lagging</th><th class="n">pending</th><th class="n">oldest pending</th><th>state</th><th class="hide-s">subscription</th>${withActions ? '<th>actions</th>' : ''}`, rows, 'no consumer groups');
  }

  pages.groups = (root) => {
    root.innerHTML = `<h1>Consumer groups</h1>
      <form class="bar" id="g-bar"><label>filter<input id="g-filter" placeholder="group or queue"></label>
      <label>rewind to (UTC)<input id="g-time" type="datetime-local" step="1"></label>
      <span class="small muted">Seek moves every partition where the group has a cursor, in one entry; its leases there are released. Rewind makes messages after that time deliverable again.</span></form>
      <section class="panel" id="g-list"></section>`;
    let last = [];
    const draw = () => {
      const f = $('#g-filter', root).value.trim().toLowerCase();
      $('#g-list', root).innerHTML = groupsTable(last.filter((g) => !f || g.name.toLowerCase().includes(f) || g.queueName.toLowerCase().includes(f)), true);
    };
    $('#g-filter', root).addEventListener('input', draw);
    $('#g-bar', root).addEventListener('submit', (e) => e.preventDefault());
    const seekPath = (g, q) => '/api/v1/consumer-groups/' + enc(g) + '/queues/' + enc(q) + '/seek';
    onActions(root, {
      'seek-end': async (g, q) => {
        const r = await api('POST', seekPath(g, q), { toEnd: true });
        return `Seek of ${g} on ${q} to the end: ${r.partitionsUpdated} partitions moved.`;
      },
      'seek-time': async (g, q) => {
        const v = $('#g-time', root).value;
        if (!v) throw new Error('Choose a time to rewind to first (the field above the table).');
        const ts = new Date(v + 'Z').toISOString();
        const r = await api('POST', seekPath(g, q), { timestamp: ts });
        return `Seek of ${g} on ${q} to ${ts}: ${r.partitionsUpdated} partitions moved.`;
      },
      delete: async (g, q) => {
        await api('DELETE', '/api/v1/consumer-groups/' + enc(g) + '/queues/' + enc(q) + '?deleteMetadata=true');
        return `Group ${g} deleted from ${q}.`;
      },
    });
    return { async refresh() { last = await get('/api/v1/consumer-groups'); draw(); } };
  };

  // signature mirrors httpapi.ErrorSignature: ids and numbers replaced, so
  // that errors of one cause group together.
  function signature(text) {
    let s = String(text == null ? '' : text);
    s = s.replace(/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/g, '<id>');
    s = s.replace(/\b[0-9a-fA-F]{12,}\b/g, '<hex>');
    s = s.replace(/\d+(\.\d+)?/g, '<n>');
    s = s.replace(/\s+/g, ' ').trim();
    return s.length > 200 ? s.slice(0, 200) + '…' : s;
  }

  pages.dlq = (root, args, params) => {
    root.innerHTML = `<h1>Dead letters</h1>
      <form class="bar" id="d-bar"><label>queue<select id="d-queue"><option value="">every queue</option></select></label>
      <label>consumer group<input id="d-group" placeholder="any"></label>
      <span id="d-purge"></span></form>
      <div class="grid2"><section class="panel"><h2>Error signatures</h2><div id="d-sigs"></div></section>
      <section class="panel"><h2>Dead-lettered per hour, last day</h2><div id="d-chart"></div></section></div>
      <section class="panel"><h2>Records <span class="small muted" id="d-count"></span></h2><div id="d-list"></div></section>`;
    let sig = params.get('signature') || '';
    const queueSel = $('#d-queue', root);
    if (params.get('queue')) queueSel.innerHTML += `<option selected>${esc(params.get('queue'))}</option>`;
    const refreshSoon = () => refreshNow();
    queueSel.addEventListener('change', refreshSoon);
    $('#d-group', root).addEventListener('change', refreshSoon);
    $('#d-bar', root).addEventListener('submit', (e) => { e.preventDefault(); refreshSoon(); });
    root.addEventListener('click', (e) => {
      const a = e.target.closest('[data-sig]');
      if (!a) return;
      e.preventDefault();
      sig = sig === a.dataset.sig ? '' : a.dataset.sig;
      refreshSoon();
    });
    onActions(root, {
      replay: async (id) => {
        const r = await api('POST', '/api/v1/dlq/' + enc(id) + '/replay');
        return `Replay of ${id}: ${r.verdict}${r.verdict === 'moved' ? ' — a new message ' + r.transactionId + ' at offset ' + r.offset + ' of ' + r.queue + '/' + r.partition + ', which every group of the queue receives' : ''}.`;
      },
      purge: async (q, g) => {
        const r = await api('DELETE', '/api/v1/dlq?queue=' + enc(q) + (g ? '&consumerGroup=' + enc(g) : ''));
        return `Purged ${r.purged} dead letters of ${q}${g ? ' (group ' + g + ')' : ''}.`;
      },
    });
    return {
      async refresh() {
        const q = queueSel.value, g = $('#d-group', root).value.trim(), acc = access();
        const [queues, an, list] = await Promise.all([
          get('/api/v1/status/queues?limit=1000'),
          get('/api/v1/status/analytics?interval=hour' + (q ? '&queue=' + enc(q) : '')),
          get('/api/v1/dlq?limit=500' + (q ? '&queue=' + enc(q) : '') + (g ? '&consumerGroup=' + enc(g) : ''))]);
        const names = queues.queues.map((x) => x.name);
        queueSel.innerHTML = '<option value="">every queue</option>' + names.map((x) => `<option ${x === q ? 'selected' : ''}>${esc(x)}</option>`).join('');
        $('#d-purge', root).innerHTML = acc.admin && q ? actBtn(keyOf('purge', q, g), `Purge ${q}${g ? ' / ' + g : ''}`, 'Confirm: destroy them', 'admin') : '';
        const sigs = an.deadLetterQueue.topErrors;
        $('#d-sigs', root).innerHTML = table('<th class="n">count</th><th>signature</th><th class="hide-s">queues</th><th class="hide-s">last</th>',
          sigs.map((s) => `<tr class="${s.signature === sig ? 'sel' : ''}" data-testid="sig-row"><td class="n" data-col="count">${n(s.count)}</td>
            <td><a href="#" data-sig="${esc(s.signature)}" title="${esc(s.error)}">${esc(s.signature)}</a></td>
            <td class="hide-s small">${esc(s.queues.join(', '))}</td><td class="hide-s small">${time(s.lastFailedAt)}</td></tr>`), 'no dead letters') +
          (sig ? '<p class="small">Showing one signature; click it again for all.</p>' : '<p class="small muted">Click a signature to list its records.</p>');
        const ts = an.deadLetterQueue.timeSeries;
        $('#d-chart', root).innerHTML = lineChart(ts.map((p) => p.timestamp), [{ name: 'dead-lettered', cls: 's-dlq', values: ts.map((p) => p.messages) }], 'dead letters per hour');
        const recs = list.messages.filter((m) => !sig || signature(m.errorMessage) === sig);
        $('#d-count', root).textContent = `(${recs.length} shown of ${list.total})`;
        $('#d-list', root).innerHTML = table('<th>failed</th><th>queue / partition</th><th>group</th><th>transactionId</th><th>error</th><th class="n">retries</th><th></th>',
          recs.map((m) => `<tr data-testid="dlq-${esc(m.dlqId)}"><td class="small">${time(m.failedAt)}</td><td>${esc(m.queue)} / ${esc(m.partition)}</td><td>${esc(m.consumerGroup)}</td>
            <td><a href="#/messages?pid=${enc(m.partitionId)}&txn=${enc(m.transactionId)}">${esc(m.transactionId)}</a></td><td class="err">${esc(m.errorMessage)}</td>
            <td class="n">${n(m.retryCount)}</td><td>${acc.write ? actBtn(keyOf('replay', m.dlqId), 'Replay', 'Confirm replay') : ''}</td></tr>`), 'no dead letters');
        footer(an.counts);
      },
    };
  };

  pages.messages = (root, args, params) => {
    root.innerHTML = `<h1>Message lookup</h1>
      <form class="bar" id="m-form"><label>queue<input id="m-queue" placeholder="orders" list="m-queues"></label><datalist id="m-queues"></datalist>
      <label>partition<input id="m-part" value="Default"></label><label>or partitionId<input id="m-pid" placeholder="uuid"></label>
      <label>transactionId<input id="m-txn" required></label><button type="submit">Look up</button></form>
      <div id="m-out"></div>`;
    let ref = params.get('pid') && params.get('txn') ? { pid: params.get('pid'), txn: params.get('txn') } : null;
    if (ref) { $('#m-pid', root).value = ref.pid; $('#m-txn', root).value = ref.txn; }
    get('/api/v1/status/queues?limit=1000').then((r) => {
      $('#m-queues', root).innerHTML = r.queues.map((q) => `<option value="${esc(q.name)}">`).join('');
    }).catch(() => {});
    $('#m-form', root).addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        let pid = $('#m-pid', root).value.trim();
        const txn = $('#m-txn', root).value.trim();
        if (!pid) {
          const qn = $('#m-queue', root).value.trim(), pn = $('#m-part', root).value.trim() || 'Default';
          const q = await get('/api/v1/resources/queues/' + enc(qn));
          const p = q.partitions.find((x) => x.name === pn);
          if (!p) throw new Error(`Queue ${qn} has no partition ${pn}.`);
          pid = p.id;
        }
        ref = { pid, txn };
        banner('');
        await refreshNow();
      } catch (err) { failed(err); }
    });
    onActions(root, {
      replay: async (id) => {
        const r = await api('POST', '/api/v1/dlq/' + enc(id) + '/replay');
        return `Replay of ${id}: ${r.verdict}.`;
      },
    });
    return {
      async refresh() {
        if (!ref) { $('#m-out', root).innerHTML = '<p class="muted">Name a message by its queue and partition (or partitionId) and its transactionId.</p>'; return; }
        const [m, tr] = await Promise.all([
          get('/api/v1/messages/' + enc(ref.pid) + '/' + enc(ref.txn)),
          get('/api/v1/traces/' + enc(ref.pid) + '/' + enc(ref.txn))]);
        const acc = access();
        $('#m-out', root).innerHTML = `<div class="cards">${card('Status', esc(m.status), 'm-status')}${card('Queue', esc(m.queue + ' / ' + m.partition), 'm-queue')}${card('Created', esc(time(m.createdAt)), 'm-created')}${card('Traces', n(tr.traces.length), 'm-traces')}</div>
          <div class="grid2"><section class="panel"><h2>Payload</h2><pre data-testid="m-payload">${esc(JSON.stringify(m.payload, null, 2))}</pre>
            <p class="small muted">id ${esc(m.id)} · transactionId ${esc(m.transactionId)} · partitionId ${esc(m.partitionId)}${m.traceId ? ' · traceId ' + esc(m.traceId) : ''}</p></section>
          <section class="panel"><h2>Consumer groups</h2>${table('<th>group</th><th>consumed</th><th>lease until</th>',
            (m.consumerGroups || []).map((g) => `<tr><td>${esc(g.name)}</td><td>${g.consumed ? tag('yes', 'ok') : tag('no', 'warn')}</td><td class="small">${time(g.leaseExpiresAt)}</td></tr>`), 'no group has read its partition')}
            <h2>Dead letters</h2>${table('<th>group</th><th>error</th><th class="n">retries</th><th>failed</th><th></th>',
            (m.deadLetters || []).map((d) => `<tr><td>${esc(d.consumerGroup)}</td><td class="err">${esc(d.errorMessage)}</td><td class="n">${n(d.retryCount)}</td><td class="small">${time(d.failedAt)}</td>
              <td>${acc.write ? actBtn(keyOf('replay', d.dlqId), 'Replay', 'Confirm replay') : ''}</td></tr>`), 'none')}</section></div>
          <section class="panel"><h2>Traces</h2>${table('<th>when</th><th>event</th><th>names</th><th>group</th><th>data</th>',
            tr.traces.map((t) => `<tr><td class="small">${time(t.created_at)}</td><td>${esc(t.event_type)}</td><td>${esc((t.trace_names || []).join(', '))}</td><td>${esc(t.consumer_group || '')}</td><td><pre>${esc(JSON.stringify(t.data))}</pre></td></tr>`), 'no traces')}</section>`;
      },
    };
  };

  pages.kv = (root) => {
    root.innerHTML = `<h1>KV browser</h1>
      <form class="bar" id="k-form"><label>namespace<input id="k-ns" required placeholder="charges"></label><label>key prefix<input id="k-prefix" required placeholder="charge:"></label>
      <label>page size<input id="k-limit" type="number" min="1" max="1000" value="100"></label><button type="submit">Browse</button>
      <span class="small muted">Read-only: getPrefix through POST /api/v1/kv (reads only: a read-only token will do). Locks and semaphores live in queen-locks.</span></form>
      <section class="panel" id="k-out"><p class="muted">Name a namespace and a key prefix.</p></section>`;
    let q = null;
    $('#k-form', root).addEventListener('submit', (e) => {
      e.preventDefault();
      q = { ns: $('#k-ns', root).value.trim(), prefix: $('#k-prefix', root).value, limit: parseInt($('#k-limit', root).value, 10) || 100, after: '' };
      refreshNow();
    });
    root.addEventListener('click', (e) => {
      const b = e.target.closest('[data-next]');
      if (b && q) { q.after = b.dataset.next; refreshNow(); }
    });
    return {
      async refresh() {
        if (!q) return;
        const op = { op: 'getPrefix', ns: q.ns, prefix: q.prefix, limit: q.limit };
        if (q.after) op.after = q.after;
        const res = await api('POST', '/api/v1/kv', { operations: [op] });
        const r = res.results[0];
        if (!r.rows) throw new Error(r.error || r.reason || 'unexpected answer');
        $('#k-out', root).innerHTML = table('<th>key</th><th>value</th><th class="n">version</th><th>expires</th><th class="hide-s">updated</th>',
          r.rows.map((row) => `<tr><td>${esc(row.key)}</td><td><pre>${esc(JSON.stringify(row.value))}</pre></td><td class="n">${n(row.version)}</td><td class="small">${row.expiresAt ? time(row.expiresAt) : 'never'}</td><td class="hide-s small">${time(row.updatedAt)}</td></tr>`), 'no keys with that prefix') +
          (r.nextAfter ? `<p><button type="button" data-next="${esc(r.nextAfter)}">Next page</button></p>` : '') +
          `<p class="small muted">${q.after ? 'after ' + esc(q.after) + ' · ' : ''}${r.rows.length} rows</p>`;
      },
    };
  };

  pages.timers = (root) => {
    root.innerHTML = `<h1>Timers</h1>
      <form class="bar" id="t-form"><label>queue<input id="t-queue" required list="t-queues"></label><datalist id="t-queues"></datalist>
      <label>count keys starting with<input id="t-prefix" placeholder="optional"></label><button type="submit">List</button>
      <span class="small muted">Pending timers of a queue (addendum §2), by key.</span></form>
      <section class="panel" id="t-out"><p class="muted">Name a queue.</p></section>`;
    let q = null, after = '', prefix = '';
    get('/api/v1/status/queues?limit=1000').then((r) => {
      $('#t-queues', root).innerHTML = r.queues.map((x) => `<option value="${esc(x.name)}">`).join('');
    }).catch(() => {});
    $('#t-form', root).addEventListener('submit', (e) => {
      e.preventDefault();
      q = $('#t-queue', root).value.trim(); prefix = $('#t-prefix', root).value; after = '';
      refreshNow();
    });
    root.addEventListener('click', (e) => { const b = e.target.closest('[data-next]'); if (b) { after = b.dataset.next; refreshNow(); } });
    return {
      async refresh() {
        if (!q) return;
        const [res, count] = await Promise.all([
          get('/api/v1/timers/' + enc(q) + '?limit=100' + (after ? '&after=' + enc(after) : '')),
          prefix ? get('/api/v1/timers/' + enc(q) + '?mode=count&prefix=' + enc(prefix)) : null]);
        const head = count
          ? `<b data-testid="timer-count">${n(count.count)}</b> pending timers on ${esc(q)} whose key starts with ${esc(prefix)}`
          : `<b data-testid="timer-count">${n(res.rows.length)}${res.truncated ? '+' : ''}</b> pending timers on ${esc(q)}${after ? ' after ' + esc(after) : ''}`;
        $('#t-out', root).innerHTML = `<p>${head}</p>` +
          table('<th>timerKey</th><th>deliver at</th><th>partition</th><th>txn</th><th class="n">attempts</th><th>last error</th><th class="hide-s">created</th>',
            res.rows.map((t) => `<tr><td>${esc(t.timerKey)}</td><td class="small">${time(t.deliverAt)}</td><td>${esc(t.partition)}</td><td>${esc(t.txn)}</td><td class="n">${n(t.attempts)}</td><td class="err">${esc(t.lastError || '')}</td><td class="hide-s small">${time(t.createdAt)}</td></tr>`), 'no pending timers') +
          (res.nextAfter ? `<p><button type="button" data-next="${esc(res.nextAfter)}">Next page</button></p>` : '');
      },
    };
  };

  pages.maintenance = (root) => {
    root.innerHTML = `<h1>Maintenance</h1><section class="panel" id="x-out"></section>
      <p class="small muted">Every switch is one log entry and holds cluster-wide (spec §4.14, addendum §4.4); reading and changing them needs an admin token.</p>`;
    onActions(root, {
      push: async (on) => { const r = await api('POST', '/api/v1/system/maintenance', { enabled: on === 'on' }); return r.message || 'push maintenance ' + on; },
      pop: async (on) => { const r = await api('POST', '/api/v1/system/maintenance/pop', { enabled: on === 'on' }); return r.message || 'pop maintenance ' + on; },
      kv: async (on) => { await api('POST', '/api/v1/system/kv-timers', { kv: on === 'on' }); return 'KV ' + (on === 'on' ? 'enabled' : 'disabled'); },
      timers: async (on) => { await api('POST', '/api/v1/system/kv-timers', { timersSchedule: on === 'on', timersFire: on === 'on' }); return 'timers ' + (on === 'on' ? 'enabled' : 'disabled'); },
    });
    return {
      async refresh() {
        const [m, p, s] = await Promise.all([get('/api/v1/system/maintenance'), get('/api/v1/system/maintenance/pop'), get('/api/v1/system/kv-timers')]);
        const admin = access().admin;
        const row = (key, what, on, detail) => `<tr data-testid="switch-${key}"><td>${esc(what)}</td><td>${on ? tag('on', 'warn') : tag('off', 'ok')}</td><td class="small">${detail}</td>
          <td>${admin ? actBtn(keyOf(key, on ? 'off' : 'on'), on ? 'Turn off' : 'Turn on', 'Confirm', 'admin') : ''}</td></tr>`;
        const rowEnabled = (key, what, enabled, detail) => `<tr data-testid="switch-${key}"><td>${esc(what)}</td><td>${enabled ? tag('enabled', 'ok') : tag('disabled', 'bad')}</td><td class="small">${detail}</td>
          <td>${admin ? actBtn(keyOf(key, enabled ? 'off' : 'on'), enabled ? 'Disable' : 'Enable', 'Confirm', 'admin') : ''}</td></tr>`;
        $('#x-out', root).innerHTML = table('<th>switch</th><th>state</th><th>what it does</th><th></th>', [
          row('push', 'Push maintenance', m.maintenanceMode, `pushes answer "buffered" and wait, invisible to pops; ${n(m.bufferedMessages)} buffered now`),
          row('pop', 'Pop maintenance', p.popMaintenanceMode, 'every pop answers 204'),
          rowEnabled('kv', 'KV', s.kvEnabled, 'KV calls (and locks) are refused while disabled'),
          rowEnabled('timers', 'Timers', s.timersScheduleEnabled && s.timersFireEnabled, `schedule ${s.timersScheduleEnabled ? 'on' : 'off'}, fire ${s.timersFireEnabled ? 'on' : 'off'}`)]);
      },
    };
  };

  // ---- routing and refreshing -----------------------------------------
  let current = null, currentName = '', timer = null, inFlight = false, generation = 0;

  async function refreshNow() {
    if (!current || inFlight) return;
    inFlight = true;
    const gen = generation;
    try {
      await current.refresh();
      if (gen === generation) {
        $('#refresh').textContent = 'updated ' + new Date().toISOString().slice(11, 19) + 'Z';
        const b = $('#banner');
        if (!b.hidden && b.dataset.fromRefresh === '1') banner('');
      }
    } catch (err) {
      if (gen === generation) { failed(err); $('#banner').dataset.fromRefresh = '1'; }
    } finally {
      inFlight = false;
    }
  }
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (document.hidden) { $('#refresh').textContent = 'paused (tab hidden)'; return; }
      await refreshNow();
      schedule();
    }, REFRESH_MS);
  }
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) { clearTimeout(timer); $('#refresh').textContent = 'paused (tab hidden)'; return; }
    refreshNow().then(schedule);
  });

  function route() {
    const h = location.hash.replace(/^#\/?/, '');
    const [path, query] = h.split('?');
    const parts = path.split('/').map((p) => decodeURIComponent(p));
    let name = parts[0] || 'cluster';
    if (!pages[name]) name = 'cluster';
    generation++;
    inFlight = false;
    banner('');
    $('#foot').textContent = '';
    const main = $('#main');
    const fresh = main.cloneNode(false); // drops the old page's listeners
    main.replaceWith(fresh);
    currentName = name;
    current = pages[name](fresh, parts.slice(1), new URLSearchParams(query || ''));
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('on', a.dataset.page === (name === 'queue' ? 'queues' : name));
    refreshNow().then(schedule);
  }

  function showAccess() {
    const acc = access();
    $('#role').textContent = acc.token ? acc.label + (acc.sub ? ' · ' + acc.sub : '') : 'no token';
    $('#token').value = '';
    $('#token').placeholder = acc.token ? 'token set (paste another)' : 'JWT (when the node asks for one)';
  }
  // A new token may change the tenant and whether the page may pick one:
  // the page draws at once with the new token, asks again, and draws once
  // more only if the tenant it sends changed.
  function tokenChanged() {
    showAccess();
    const before = tenantHeader();
    route();
    loadTenancy().catch(() => {}).then(() => { if (tenantHeader() !== before) route(); });
  }
  $('#token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const v = $('#token').value.trim().replace(/^Bearer\s+/i, '');
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    tokenChanged();
  });
  $('#token-clear').addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); tokenChanged(); });
  // Picking a tenant: remembered, and the page reads everything again.
  $('#tenancy').addEventListener('change', (e) => {
    if (e.target.id !== 'tenant-pick') return;
    if (e.target.value) localStorage.setItem(TENANT_KEY, e.target.value); else localStorage.removeItem(TENANT_KEY);
    showTenancy();
    health().then(noteHealth).catch(() => {});
    route();
  });

  window.addEventListener('hashchange', route);
  showAccess();
  // The first page waits for the tenant, so that it reads the right one.
  loadTenancy().catch(() => {}).then(route);
  // For tests and curious operators: the page's state.
  window.queenDashboard = { page: () => currentName, refresh: refreshNow, access, signature, tenant: () => ({ ...viewedTenant(), header: tenantHeader(), pick: tenancy.pick, claim: tenancy.claim }) };
})();
