// The editor's "Import ONNX" uploader (portal/upload_widget.py): sends the chosen file to the portal's
// upload route (portal/upload_route.py) in pieces, with a progress bar and a Cancel button, then tells
// the page which upload to import. The file is never read whole, here or on the server.
const mb = (n) => `${(n / 2 ** 20).toLocaleString("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1})} MB`;

function routeBase(slugs) {
  // The portal's base address as this page sees it (behind Open OnDemand it starts with /rnode/<host>/<port>/).
  let path = window.location.pathname;
  for (const slug of slugs) {
    if (path.endsWith("/" + slug)) { path = path.slice(0, -slug.length); break; }
  }
  return path.endsWith("/") ? path : path + "/";
}

function build(parent) {
  const root = document.createElement("div");
  root.className = "ft-onnx-upload";
  root.innerHTML = `
    <label class="ft-label"></label>
    <div class="ft-row">
      <input type="file" accept=".onnx" class="ft-file">
      <button type="button" class="ft-cancel" hidden>Cancel upload</button>
    </div>
    <progress class="ft-progress" max="1" value="0" hidden></progress>
    <div class="ft-status" role="status"></div>
    <div class="ft-error" role="alert"></div>`;
  parent.appendChild(root);
  return root;
}

async function answer(response) {
  try {
    const body = await response.json();
    if (body && typeof body === "object") return body;
  } catch (_) { /* not JSON: said below */ }
  return {proxy: true, error: response.status === 404 || response.status === 405
    ? "the portal's upload route did not answer: the portal was started without it; start it with "
      + "scripts/portal.sh (streamlit run serve.py)"
    : `the portal answered ${response.status} ${response.statusText}`};
}

export default function (component) {
  const {data, setTriggerValue, parentElement} = component;
  const root = parentElement.querySelector(".ft-onnx-upload") || build(parentElement);
  root.ftData = data;
  const label = root.querySelector(".ft-label");
  const input = root.querySelector(".ft-file");
  const cancel = root.querySelector(".ft-cancel");
  const progress = root.querySelector(".ft-progress");
  const status = root.querySelector(".ft-status");
  const error = root.querySelector(".ft-error");
  label.textContent = data.label;
  input.setAttribute("aria-label", data.label);
  if (root.ftPending && data.imported === root.ftPending.token) {
    status.textContent = root.ftPending.text;  // imported: the page says how it went
    root.ftPending = null;
  }
  if (root.ftBound) return;
  root.ftBound = true;

  const fail = (text) => { error.textContent = text; status.textContent = ""; };
  const idle = () => {
    cancel.hidden = true; progress.hidden = true; input.disabled = false; input.value = ""; root.ftAbort = null;
  };
  cancel.onclick = () => { if (root.ftAbort) root.ftAbort.abort(); };
  input.onchange = async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const d = root.ftData;
    error.textContent = "";
    if (!d.token) {
      idle();
      return fail("Could not upload: the folder for its weights is refused (see beside); choose a folder under "
                  + "your data roots first.");
    }
    if (!file.name.toLowerCase().endsWith(".onnx")) {
      idle();
      return fail(`Could not import ${file.name}: it is not an ONNX model; choose a file ending in .onnx.`);
    }
    if (file.size > d.limit) {
      idle();
      return fail(`Could not import ${file.name}: it is ${mb(file.size)}; this portal imports ONNX models of at `
                  + `most ${mb(d.limit)} (import larger models with python -m flowtrain import-onnx).`);
    }
    const url = routeBase(d.slugs) + "api/flowtrain/upload/" + encodeURIComponent(d.token);
    const abort = new AbortController();
    root.ftAbort = abort;
    cancel.hidden = false; progress.hidden = false; progress.value = 0; input.disabled = true;
    const started = performance.now();
    let offset = 0;
    let piece = d.piece;
    try {
      while (offset < file.size) {
        let query = `?offset=${offset}`;
        if (offset === 0) query += `&total=${file.size}&name=${encodeURIComponent(file.name)}`;
        const response = await fetch(url + query, {
          method: "PUT", body: file.slice(offset, offset + piece), signal: abort.signal,
          headers: {"Content-Type": "application/octet-stream"}, credentials: "same-origin"});
        const body = await answer(response);
        if (response.status === 413 && body.proxy && piece >= 2 ** 20) {
          piece = Math.floor(piece / 4);  // a proxy on the way (nginx: 1 MB by default) takes smaller pieces
          continue;
        }
        if (!response.ok || body.error) throw new Error(body.error || `the portal answered ${response.status}`);
        offset = body.received;
        progress.value = offset / file.size;
        status.textContent = `Uploading ${file.name}: ${mb(offset)} of ${mb(file.size)}`;
      }
    } catch (err) {
      idle();
      if (err.name === "AbortError") {
        await fetch(url, {method: "DELETE", credentials: "same-origin"}).catch(() => null);
        status.textContent = `The upload of ${file.name} was cancelled; nothing of it was kept.`;
        return;
      }
      return fail(`Could not import ${file.name}: ${err.message}`);
    }
    const seconds = (performance.now() - started) / 1000;
    idle();
    const done = `Uploaded ${file.name} (${mb(file.size)}) in ${seconds.toFixed(1)} s`;
    root.ftPending = {token: d.token, text: done + "."};
    status.textContent = done + "; importing it.";
    setTriggerValue("uploaded", {token: d.token, seconds});
  };
}
