// partq console: a page per view, redrawn from the server's JSON every second
// (every 5 s for dead items). User data (queue names, hosts, keys, errors,
// payloads) only ever goes into the page as text (append of a string makes a
// text node; never innerHTML), so a payload of <script> shows as text.
'use strict';

const csrf = document.querySelector('meta[name="partq-csrf"]').content;
const mode = document.querySelector('meta[name="partq-mode"]').content;
const actions = mode === 'actions';
let timer = null;
let view = null;  // what render() draws into; reset on every route change

// el('td', {class: 'num'}, 'text', child): an element with attributes and
// children; strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

// A payload's runs (the server's payload_runs): its text as it is, the bytes
// that are not printable text as \xNN marked apart (so a typed "\x00" and a
// NUL byte differ), and how long the whole is when only its head is shown.
function payload(runs) {
  const td = el('td', {class: 'payload'});
  for (const [kind, text] of runs) {
    if (kind === 't') td.append(text);
    else td.append(el('span', {class: kind === 'x' ? 'esc' : 'more',
      title: kind === 'x' ? 'bytes that are not printable text, as \\xNN' : ''}, text));
  }
  return td;
}

async function api(path) {
  const r = await fetch(path, {credentials: 'same-origin'});
  if (r.status === 401) { location.reload(); throw new Error('logged out'); }
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

// POSTs an action; resolves to {ok, status, body}.
async function act(path, body) {
  const r = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrf},
    body: JSON.stringify(body),
  });
  let j = {};
  try { j = await r.json(); } catch (e) { /* not JSON */ }
  return {ok: r.ok, status: r.status, body: j};
}

function secs(s) {
  if (s === null || s === undefined) return '–';
  if (s < 1) return (s * 1000).toFixed(0) + ' ms';
  if (s < 120) return s.toFixed(1) + ' s';
  if (s < 7200) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function num(n) { return n === null || n === undefined ? '–' : n.toLocaleString('en-US'); }
function rate(r) { return r === null || r === undefined ? '–' : (r > 0 ? '+' : '') + r.toFixed(1); }
function perSec(r) { return r === null || r === undefined ? '–' : r.toFixed(r > 0 && r < 10 ? 2 : 1); }

// A colour per session, stable across redraws: the sessions this tab has seen
// take hues in turn, each 137.5° (the golden angle) from the last, so any few
// of them are far apart on the wheel.
const hues = new Map();
function hue(id) {
  if (!hues.has(id)) hues.set(id, (hues.size * 137.508 + 200) % 360);
  return hues.get(id);
}
// Lag shades the owner's colour: light with nothing waiting, darker as the
// oldest ready item ages (log scale, darkest from 10 minutes).
function colour(id, lagSeconds) {
  const lag = Math.min(1, Math.log10(1 + (lagSeconds || 0)) / Math.log10(601));
  return `hsl(${hue(id).toFixed(0)}, 65%, ${(72 - 42 * lag).toFixed(0)}%)`;
}

function nav(current, queue) {
  const n = document.getElementById('nav');
  clear(n);
  const link = (href, text, key) => el('a', {href, class: key === current ? 'here' : ''}, text);
  n.append(link('#/', 'Queues', 'queues'));
  if (queue) {
    const q = encodeURIComponent(queue);
    n.append(link(`#/queue/${q}`, `${queue}: parts`, 'parts'),
             link(`#/queue/${q}/sessions`, 'sessions', 'sessions'),
             link(`#/queue/${q}/dead`, 'dead items', 'dead'),
             link(`#/queue/${q}/schedules`, 'schedules', 'schedules'),
             link(`#/queue/${q}/groups`, 'groups', 'groups'));
  }
}

function footer(text) {
  const f = document.getElementById('footer');
  clear(f);
  f.append(text);
}

function message(node, text, bad) {
  clear(node);
  node.className = 'msg' + (bad ? ' error' : '');
  node.append(text);
}

// --- queues ------------------------------------------------------------------

async function drawQueues() {
  const j = await api('/api/queues');
  clear(view);
  view.append(el('h1', {}, 'Queues'));
  const msg = el('div', {class: 'msg', id: 'msg'});
  const head = el('tr', {}, ...['queue', 'parts', 'live sessions', 'parts without a live owner',
    'ready', 'delayed',
    'held', 'in flight', 'dead', 'groups (held / started / ended)', 'oldest ready',
    'acked/s (1 min)', 'failed/s (1 min)', 'dead-lettered/s (1 min)',
    'backlog/s (1 min)', 'backlog/s (5 min)', 'state', ''].map((h) => el('th', {}, h)));
  const body = el('tbody', {});
  for (const q of j.queues) {
    const toggle = el('button', {
      class: 'pause', 'data-queue': q.name,
      onclick: async () => {
        const r = await act(q.paused ? '/api/resume' : '/api/pause', {queue: q.name});
        message(msg, r.ok ? `${q.name}: ${q.paused ? 'resumed' : 'paused'}` : r.body.error || r.status, !r.ok);
        refresh();
      },
    }, q.paused ? 'resume' : 'pause');
    toggle.disabled = !actions;
    body.append(el('tr', {'data-queue': q.name},
      el('td', {}, el('a', {href: `#/queue/${encodeURIComponent(q.name)}`}, q.name)),
      el('td', {class: 'num'}, num(q.parts)),
      el('td', {class: 'num sessions'}, num(q.sessions) +
        (q.expired_sessions ? ` (+${num(q.expired_sessions)} expired)` : '')),
      el('td', {class: 'num unowned'}, num(q.unowned_parts)),
      el('td', {class: 'num'}, num(q.ready)), el('td', {class: 'num'}, num(q.delayed)),
      el('td', {class: 'num'}, num(q.held)),
      el('td', {class: 'num in-flight'}, num(q.in_flight) +
        (q.in_flight_unowned ? ` (${num(q.in_flight_unowned)} with no live owner)` : '')),
      el('td', {class: 'num'}, el('a', {href: `#/queue/${encodeURIComponent(q.name)}/dead`}, num(q.dead))),
      el('td', {class: 'num'}, q.groups ?
        `${num(q.groups.held)} / ${num(q.groups.started)} / ${num(q.groups.ended)}` : '–'),
      el('td', {class: 'num'}, secs(q.oldest_ready_seconds)),
      el('td', {class: 'num acked'}, perSec(q.acked_per_second_1m)),
      el('td', {class: 'num'}, perSec(q.failed_per_second_1m)),
      el('td', {class: 'num'}, perSec(q.dead_lettered_per_second_1m)),
      el('td', {class: 'num'}, rate(q.backlog_per_second_1m)),
      el('td', {class: 'num'}, rate(q.backlog_per_second_5m)),
      el('td', {class: q.paused ? 'paused' : ''}, q.paused ? 'paused' : 'running'),
      el('td', {}, toggle)));
  }
  view.append(el('table', {id: 'queues'}, el('thead', {}, head), body), msg,
    el('p', {class: 'note'}, 'Counts come from one status read per queue every 10 s or more ' +
      '(spaced so that it never keeps the database busy more than 1/40 of the time); ' +
      'ownership is read every second. The backlog\'s rate is how this console saw it ' +
      '(ready + delayed + in flight) change between its reads: negative while it falls. ' +
      'Acked/s, failed/s (attempts to be retried) and dead-lettered/s are what the live ' +
      'workers finished, each over the minute before its last heartbeat (every third of the ' +
      'session TTL; each heartbeat carries what its worker finished since the last one), ' +
      'summed: they lag by up to one heartbeat, fall to 0 within two minutes and a heartbeat ' +
      'after the work stops, and a worker that expired or left counts 0.'));
  const errs = [j.owners_error, j.status_error].filter((e) => e);
  footer(errs.length ? 'database: ' + errs.join('; ') : `${j.queues.length} queue(s)`);
}

// --- a queue's part map --------------------------------------------------------

let mapState = null;  // {queue, cells: [div]} while the map page is shown

async function drawParts(queue) {
  const j = await api(`/api/queue?name=${encodeURIComponent(queue)}`);
  if (!mapState || mapState.queue !== queue) {
    clear(view);
    mapState = {queue, cells: []};
    const map = el('div', {class: 'map' + (j.parts > 512 ? ' big' : ''), id: 'map'});
    for (let p = 0; p < j.parts; p++) {
      const c = el('div', {class: 'cell', 'data-part': String(p)});
      mapState.cells.push(c);
      map.append(c);
    }
    mapState.title = el('h1', {});
    mapState.summary = el('p', {id: 'summary'});
    mapState.legend = el('div', {class: 'legend', id: 'legend'});
    mapState.handoffs = el('tbody', {});
    mapState.chart = el('div', {id: 'throughput'});
    view.append(mapState.title, mapState.summary, mapState.legend, map,
      el('p', {class: 'note'}, 'One cell per part, coloured by its owner; the darker, the older ' +
        'its oldest ready item. Hatched: no live owner (none, or a session past its TTL that ' +
        'no live worker has deleted yet: its parts wait for one).'),
      el('h2', {}, 'Throughput, items a minute'), mapState.chart,
      el('p', {class: 'note'}, 'What the workers finished each minute (UTC), as their ' +
        'heartbeats report it: the current minute fills in as they heartbeat.'),
      el('h2', {}, 'Hand-offs this console saw in the last hour'),
      el('p', {class: 'note'}, 'What this console observed by reading ownership every second ' +
        'since it started (not a history kept in the database): a part that moved and moved ' +
        'back between two reads is not shown, and another console may have seen other moves.'),
      el('table', {id: 'handoffs'}, el('thead', {}, el('tr', {},
        ...['when', 'parts', 'count', 'from', 'to'].map((h) => el('th', {}, h)))),
        mapState.handoffs));
  }
  clear(mapState.title);
  mapState.title.append(`${j.name} `, el('span', {class: j.paused ? 'paused' : ''}, j.paused ? '(paused)' : ''));
  const expired = j.sessions.length - j.live_sessions;
  clear(mapState.summary);
  mapState.summary.append(`${j.parts} parts, ${j.assignment} assignment; ` +
    `${j.live_sessions} live session(s)` + (expired ? `, ${expired} expired` : '') + '; ' +
    `${j.unowned_parts} part(s) without a live owner` +
    (j.totals ? `; ${num(j.totals.ready)} ready, ${num(j.totals.in_flight)} in flight` +
      (j.totals.in_flight_unowned ? ` (${num(j.totals.in_flight_unowned)} with no live owner)` : '') +
      `, ${num(j.totals.dead)} dead, oldest ready ${secs(j.totals.oldest_ready_seconds)}` : ''));
  for (let p = 0; p < j.parts; p++) {
    const c = mapState.cells[p];
    const o = j.owner[p];
    const s = o >= 0 ? j.sessions[o] : null;
    const live = s && !s.expired;
    const lag = j.oldest_ready_seconds.length ? j.oldest_ready_seconds[p] : 0;
    const ready = j.ready.length ? j.ready[p] : null;
    // An expired owner's parts are hatched like those of no owner: nothing runs them.
    c.className = live ? 'cell' : s ? 'cell none expired' : 'cell none';
    c.style.background = live ? colour(s.id, lag) : '';
    c.dataset.owner = live ? s.id : '';
    c.dataset.expiredOwner = s && !live ? s.id : '';
    c.title = `part ${p}: ${live ? `${s.host}:${s.pid}` : s ? `${s.host}:${s.pid}, expired` : 'no owner'}; ` +
      `${ready === null ? '?' : ready} ready, oldest ${secs(lag)}`;
  }
  clear(mapState.legend);
  for (const s of j.sessions) {
    mapState.legend.append(el('span', {'data-session': s.id, class: s.expired ? 'expired' : ''},
      el('span', {class: s.expired ? 'sw expired' : 'sw'}),
      `${s.host}:${s.pid} (${s.parts} parts${s.expired ? ', expired' : ''})`));
    if (!s.expired) mapState.legend.lastChild.firstChild.style.background = colour(s.id, 0);
  }
  if (j.throughput) drawThroughput(mapState.chart, j.throughput);
  clear(mapState.handoffs);
  for (const h of j.handoffs) {
    mapState.handoffs.append(el('tr', {},
      el('td', {}, `${secs(h.seconds_ago)} ago`), el('td', {}, h.parts),
      el('td', {class: 'num'}, num(h.count)),
      el('td', {}, h.from === null ? '(no owner)' : h.from),
      el('td', {}, h.to === null ? '(no owner)' : h.to)));
  }
  footer(`ownership read ${secs(j.owners_age_seconds)} ago; counts read ` +
    `${j.status_age_seconds === undefined ? '(not yet)' : secs(j.status_age_seconds) + ' ago'}`);
}

// A bar per minute, acked stacked under failed and dead-lettered: an inline SVG made
// of elements (no markup strings, no styles: the page's CSP allows neither inline).
const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}
// "2026-11-26T09:58:00+00:00" -> "09:58"
function hhmm(rfc3339) { return rfc3339.slice(11, 16); }
function drawThroughput(node, t) {
  const m = t.minutes;
  const W = 600, H = 120, bar = W / m.length;
  const top = Math.max(1, ...m.map((x) => x.acked + x.retried + x.dead));
  const chart = svg('svg', {width: W, height: H + 18, viewBox: `0 0 ${W} ${H + 18}`,
    class: 'chart', role: 'img'});
  m.forEach((x, i) => {
    let y = H;
    for (const [k, cls] of [['acked', 'ok'], ['retried', 'retry'], ['dead', 'dead']]) {
      const h = x[k] / top * H;
      if (h <= 0) continue;
      y -= h;
      chart.append(svg('rect', {x: i * bar + 1, y, width: Math.max(1, bar - 2), height: h,
        class: cls, 'data-minute': x.minute, 'data-count': x[k]},
        svg('title', {}, `${hhmm(x.minute)} UTC: ${num(x[k])} ${k}`)));
    }
  });
  chart.append(svg('line', {x1: 0, y1: H, x2: W, y2: H, class: 'axis'}));
  chart.append(svg('text', {x: 0, y: H + 14, class: 'label'}, m.length ? hhmm(m[0].minute) : ''));
  chart.append(svg('text', {x: W, y: H + 14, class: 'label end'}, m.length ? hhmm(m[m.length - 1].minute) : ''));
  chart.append(svg('text', {x: 4, y: 12, class: 'label'}, `${num(top)}/min`));
  clear(node);
  node.append(chart, el('p', {id: 'rates'},
    el('span', {class: 'sw ok'}), `${perSec(t.acked_per_second)} acked/s  `,
    el('span', {class: 'sw retry'}), `${perSec(t.failed_per_second)} failed/s (retried)  `,
    el('span', {class: 'sw dead'}), `${perSec(t.dead_lettered_per_second)} dead-lettered/s`,
    ' over the minute before each live worker\'s last heartbeat'));
}

// --- sessions -------------------------------------------------------------------

async function drawSessions(queue) {
  const j = await api(`/api/queue?name=${encodeURIComponent(queue)}`);
  clear(view);
  view.append(el('h1', {}, `${j.name}: sessions`));
  const body = el('tbody', {});
  for (const s of j.sessions) {
    body.append(el(
        'tr', {'data-session': s.id, class: s.expired ? 'expired' : ''},
        el('td', {}, el('code', {}, s.id)), el('td', {}, s.instance || '–'), el('td', {}, s.host),
        el('td', {class: 'num'}, String(s.pid)), el('td', {class: 'num'}, num(s.parts)),
        el('td', {class: 'num'}, secs(s.heartbeat_seconds)),
        el('td', {class: 'num'},
           s.expires_in_seconds === undefined ? '–' :
               s.expired                      ? `expired ${secs(-s.expires_in_seconds)} ago` :
                                                secs(s.expires_in_seconds)),
        el('td', {}, s.also_serves && s.also_serves.length ? s.also_serves.join(', ') : '–')));
  }
  view.append(
      el('table', {id: 'sessions'},
         el('thead', {},
            el('tr', {},
               ...['session', 'instance', 'host', 'pid', 'parts', 'heartbeat age', 'expires in',
                   'its process also serves']
                   .map((h) => el('th', {}, h)))),
         body),
      el('p', {class: 'note'},
         'As of the last ownership read (every second). An expired ' +
             'session missed its heartbeats for longer than the queue\'s TTL; it keeps its parts ' +
             '(and nothing runs them) until a live worker\'s heartbeat deletes it.'));
  footer(`ownership read ${secs(j.owners_age_seconds)} ago`);
}

// --- dead items -----------------------------------------------------------------

async function drawDead(queue) {
  const j = await api(`/api/dead?name=${encodeURIComponent(queue)}`);
  clear(view);
  const msg = el('div', {class: 'msg', id: 'msg'});
  if (pageMessage) message(msg, pageMessage.text, pageMessage.bad);
  const run = async (path, body, what) => {
    const r = await act(path, Object.assign({queue}, body));
    pageMessage = {text: r.ok ? what(r.body) : `refused (${r.status}): ${r.body.error || ''}`, bad: !r.ok};
    refresh();
  };
  const button = (text, cls, onclick) => {
    const b = el('button', {class: cls, onclick}, text);
    b.disabled = !actions;
    return b;
  };
  view.append(el('h1', {}, `${j.name}: dead items`),
    el('p', {}, button('Requeue all', 'requeue-all', () => {
      if (confirm(`Requeue every dead item of ${queue}?`)) {
        run('/api/dead/requeue', {all: true}, (b) => `requeued ${b.requeued}, kept ${b.kept}`);
      }
    }), ' ', button('Delete all', 'danger delete-all', () => {
      if (confirm(`Delete every dead item of ${queue} for good?`)) {
        run('/api/dead/delete', {all: true}, (b) => `deleted ${b.deleted}`);
      }
    })), msg);
  const body = el('tbody', {});
  for (const d of j.items) {
    body.append(el('tr', {'data-id': String(d.id)},
      el('td', {class: 'num'}, String(d.id)), el('td', {class: 'num'}, String(d.part)),
      el('td', {class: 'num'}, String(d.attempts)), el('td', {}, d.failed_at),
      el('td', {class: 'error-text'}, el('code', {}, d.error)),
      el('td', {}, d.key === null ? '–' : el('code', {}, d.key)),
      payload(d.payload_runs),
      el('td', {},
        button('requeue', 'requeue', () => run('/api/dead/requeue', {ids: [d.id]},
          (b) => b.requeued ? `requeued item ${d.id}` : `item ${d.id} kept: a live item has its dedup key`)),
        ' ',
        button('delete', 'danger delete', () => run('/api/dead/delete', {ids: [d.id]},
          (b) => `deleted ${b.deleted} item`)))));
  }
  view.append(el('table', {id: 'dead'}, el('thead', {}, el('tr', {},
    ...['id', 'part', 'attempts', 'failed at (UTC)', 'error', 'key', 'payload', '']
      .map((h) => el('th', {}, h)))), body));
  view.append(el('p', {class: 'note'}, `The ${j.limit} most recent, newest first. Payloads show ` +
    'their first 256 bytes; bytes that are not printable text show as \\xNN, marked.'));
  footer(j.items.length ? `${j.items.length} shown` : 'no dead items');
}
let pageMessage = null;

// --- schedules --------------------------------------------------------------------

async function drawSchedules(queue) {
  const j = await api(`/api/schedules?name=${encodeURIComponent(queue)}`);
  clear(view);
  const msg = el('div', {class: 'msg', id: 'msg'});
  if (pageMessage) message(msg, pageMessage.text, pageMessage.bad);
  view.append(el('h1', {}, `${j.name}: schedules`), msg);
  const body = el('tbody', {});
  for (const s of j.schedules) {
    const del = el('button', {class: 'danger delete', onclick: async () => {
      if (!confirm(`Delete schedule ${s.name}?`)) return;
      const r = await act('/api/schedule/delete', {queue, schedule: s.name});
      pageMessage = {text: r.ok ? `deleted schedule ${s.name}` : `refused (${r.status}): ${r.body.error || ''}`,
        bad: !r.ok};
      refresh();
    }}, 'delete');
    del.disabled = !actions;
    body.append(el('tr', {'data-schedule': s.name},
      el('td', {}, el('code', {}, s.name)), el('td', {}, s.cadence), el('td', {}, s.time_zone),
      el('td', {}, s.next_tick === null ? '–' : s.next_tick),
      el('td', {}, s.last_tick === null ? '–' : s.last_tick),
      el('td', {class: 'num'}, num(s.fired)), el('td', {class: 'num'}, num(s.missed)),
      el('td', {class: 'catch-up'}, s.catch_up),
      el('td', {class: 'error-text'}, s.error ? el('code', {}, s.error) : '–'),
      payload(s.payload_runs), el('td', {}, del)));
  }
  view.append(el('table', {id: 'schedules'}, el('thead', {}, el('tr', {},
    ...['schedule', 'cadence', 'time zone', 'next tick (UTC)', 'last tick (UTC)', 'fired',
      'missed', 'catch-up', 'last error', 'payload', ''].map((h) => el('th', {}, h)))), body),
    el('p', {class: 'note'}, 'The queue\'s workers fire each tick once (partq schedule add ' +
      'makes one); a tick its firer missed by dying or stalling is fired late by the next, ' +
      'if it is at most the catch-up window old; missed: due ticks older than that, skipped.'));
  footer(j.schedules.length ? `${j.schedules.length} schedule(s)` : 'no schedules');
}

// --- groups -----------------------------------------------------------------------

async function drawGroups(queue) {
  const j = await api(`/api/groups?name=${encodeURIComponent(queue)}`);
  clear(view);
  view.append(el('h1', {}, `${j.name}: groups`));
  const body = el('tbody', {});
  for (const g of j.groups) {
    const state = g.ended_at ? 'ended' : g.started_at ? 'started' : 'held';
    body.append(el('tr', {'data-group': g.id},
      el('td', {}, el('code', {}, g.id)), el('td', {}, state),
      el('td', {class: 'num'}, num(g.pending)), el('td', {class: 'num'}, num(g.done)),
      el('td', {class: 'num'}, num(g.dead)), el('td', {class: 'num'}, num(g.cancelled)),
      el('td', {}, g.created_at), el('td', {}, g.started_at || '–'), el('td', {}, g.ended_at || '–'),
      el('td', {}, g.end_queue === null ? '–' : g.end_queue),
      el('td', {class: 'error-text'}, g.end_error === null ? '' : g.end_error)));
  }
  view.append(el('table', {id: 'groups'}, el('thead', {}, el('tr', {},
    ...['group', 'state', 'pending', 'done', 'dead', 'cancelled', 'created (UTC)', 'started',
      'ended', 'end queue', 'end error'].map((h) => el('th', {}, h)))), body),
    el('p', {class: 'note'}, `The ${j.limit} newest, ended ones too (partq group shows one, ` +
      'with what it has in flight).'));
  footer(j.groups.length ? `${j.groups.length} group(s)` : 'no groups');
}

// --- routing ---------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'queue' && parts[1]) {
    const sub = parts[2] || 'parts';
    return {page: sub, queue: parts[1]};
  }
  return {page: 'queues'};
}

async function refresh() {
  const r = route();
  try {
    if (r.page === 'queues') await drawQueues();
    else if (r.page === 'sessions') await drawSessions(r.queue);
    else if (r.page === 'dead') await drawDead(r.queue);
    else if (r.page === 'schedules') await drawSchedules(r.queue);
    else if (r.page === 'groups') await drawGroups(r.queue);
    else await drawParts(r.queue);
  } catch (e) {
    footer('error: ' + e.message);
  }
}

function render() {
  if (timer) clearInterval(timer);
  view = document.getElementById('main');
  clear(view);
  mapState = null;
  pageMessage = null;
  const r = route();
  nav(r.page, r.queue);
  refresh();
  timer = setInterval(refresh, ['dead', 'schedules', 'groups'].includes(r.page) ? 5000 : 1000);
}

document.getElementById('mode').append(
  mode === 'read-only' ? 'read-only' : mode === 'no-token' ? 'read-only: actions need --token-file' : '');
if (mode === 'no-token') document.getElementById('logout').remove();
window.addEventListener('hashchange', render);
render();
