// The dashboard's one script (served at <dashboard>/app.js; CSP script-src 'self'): the auto-refresh
// of a running workflow, which the reader can pause (WCAG 2.2.1: a timed refresh the user can turn
// off). Without it the page shows a plain "Reload" link and does not refresh on its own.

/** Where the reader's pause is kept for the tab (sessionStorage), so it holds across reloads. */
export const REFRESH_PAUSED_KEY = 'svc-auto-refresh-paused';

export const SCRIPT = `
(function () {
  var box = document.querySelector('[data-refresh-seconds]');
  if (!box) return;
  var seconds = Number(box.getAttribute('data-refresh-seconds')) || 3;
  var key = '${REFRESH_PAUSED_KEY}';
  var toggle = box.querySelector('input[type=checkbox]');
  var label = box.querySelector('label');
  var paused = false;
  try { paused = sessionStorage.getItem(key) === '1'; } catch (e) {}
  toggle.checked = !paused;
  label.hidden = false;
  toggle.addEventListener('change', function () {
    paused = !toggle.checked;
    try { sessionStorage.setItem(key, paused ? '1' : '0'); } catch (e) {}
  });
  setInterval(function () {
    if (!paused && document.visibilityState === 'visible') location.reload();
  }, seconds * 1000);
})();
`;
