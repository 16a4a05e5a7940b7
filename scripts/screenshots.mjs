// Screenshots of the integration's config flow (the choice of model server,
// the OpenAI-compatible and the Ollama path), options flow, device page and
// two repair issues, taken by headless chromium through playwright-core. Called
// by scripts/screenshots, which starts Home Assistant and a fake Ollama first.
//
// ONLY=name,name takes only some groups (config, device, options, mapping,
// repair, damaged); a group needs the ones before it to have run once. The group
// assist (the Assist dialog in the house scripts/develop sets up) runs only
// when named: scripts/screenshots --assist.
import { writeFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.resolve(process.env.NODE_PATH, "x.js"));
const { chromium } = require("playwright-core");

const HA = "http://127.0.0.1:8123";
const CLIENT_ID = `${HA}/`;
const OUT = process.env.OUT;
// HA's config folder, as scripts/screenshots makes it (the damaged-file
// repair damages the assistant's database there).
const CONFIG = process.env.HA_CONFIG_DIR ?? path.join(process.env.NODE_PATH, "..", "config");
// scripts/screenshots --assist logs in as the owner scripts/develop made.
const USER = {
  name: "Demo",
  username: process.env.HA_USERNAME ?? "demo",
  password: process.env.HA_PASSWORD ?? "demo-password-1234",
};
const DOMAIN = "ha_personal_assistant";
const VIEWPORT = { width: 1280, height: 860 };
// Telegram ids of the demo: the first two have an allowed private chat in
// the Telegram bot entry scripts/screenshots writes (Anna, Ben), the third
// has none and is shown by its id.
const ANNA = "123456789";
const BEN = "234567890";
const STRANGER = "345678901";
const PERMISSION_SECTIONS = [
  "Permissions: ask for confirmation",
  "Permissions: never allowed",
  "Permissions: scripts",
  "Permissions: who confirms for everyone",
];

async function json(url, options = {}) {
  const response = await fetch(url, options);
  if (!response.ok) {
    throw new Error(`${options.method ?? "GET"} ${url}: ${response.status} ${await response.text()}`);
  }
  return response.json();
}

async function tokensFromCode(code) {
  return json(`${HA}/auth/token`, {
    method: "POST",
    body: new URLSearchParams({ grant_type: "authorization_code", code, client_id: CLIENT_ID }),
  });
}

// Create the owner through the onboarding API and finish onboarding.
async function onboard() {
  const { auth_code } = await json(`${HA}/api/onboarding/users`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_id: CLIENT_ID, language: "en", ...USER }),
  });
  const tokens = await tokensFromCode(auth_code);
  const auth = { Authorization: `Bearer ${tokens.access_token}`, "Content-Type": "application/json" };
  await json(`${HA}/api/onboarding/core_config`, { method: "POST", headers: auth, body: "{}" });
  await json(`${HA}/api/onboarding/analytics`, { method: "POST", headers: auth, body: "{}" });
  await json(`${HA}/api/onboarding/integration`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ client_id: CLIENT_ID, redirect_uri: `${HA}/?auth_callback=1` }),
  });
  // Onboarding adds the weather (Met.no) and Radio Browser, which need the
  // internet: without it they would stay "Initializing" in every picture.
  const entries = await json(`${HA}/api/config/config_entries/entry`, { headers: auth });
  for (const entry of entries.filter((item) => ["met", "radio_browser"].includes(item.domain))) {
    await json(`${HA}/api/config/config_entries/entry/${entry.entry_id}`, { method: "DELETE", headers: auth });
  }
  return tokens;
}

// Log in through the login flow (when onboarding was done before).
async function login() {
  const flow = await json(`${HA}/auth/login_flow`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      client_id: CLIENT_ID,
      handler: ["homeassistant", null],
      redirect_uri: `${HA}/?auth_callback=1`,
    }),
  });
  const done = await json(`${HA}/auth/login_flow/${flow.flow_id}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_id: CLIENT_ID, username: USER.username, password: USER.password }),
  });
  return tokensFromCode(done.result);
}

// The open dialog's box (the native <dialog> inside HA's dialog element).
function dialog(page) {
  return page.locator("wa-dialog dialog[open]").last();
}

// Wait until every picture in the shot (in shadow roots too) has loaded.
async function imagesLoaded(target) {
  for (let tries = 0; tries < 30; tries += 1) {
    const loaded = await target.evaluate((element) => {
      const images = [];
      const walk = (node) => {
        if (node.tagName === "IMG") images.push(node);
        if (node.shadowRoot) walk(node.shadowRoot);
        for (const child of node.children ?? []) walk(child);
      };
      walk(element);
      return images.every((image) => image.complete && image.naturalWidth > 0);
    });
    if (loaded) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  console.log("an image in the shot did not load");
}

// Let animations settle, then save the page, or only the open dialog.
async function shot(page, name, { dialogOnly = false } = {}) {
  await page.waitForTimeout(1500);
  await imagesLoaded(dialogOnly ? dialog(page) : page.locator("html"));
  const file = path.join(OUT, name);
  if (dialogOnly) {
    await dialog(page).screenshot({ path: file });
  } else {
    await page.screenshot({ path: file });
  }
  console.log(`saved ${file}`);
}

async function submit(page) {
  await page.getByRole("button", { name: /^(submit|next)$/i }).click();
}

// Pick an option of a drop-down (SelectSelector) by its field label.
async function choose(page, label, option) {
  await page.getByLabel(label, { exact: true }).click();
  // Every drop-down of the form holds its items; only the open one shows.
  await page.getByRole("menuitem", { name: option }).filter({ visible: true }).click();
}

const onboarding = await json(`${HA}/api/onboarding`).catch(() => []);
const tokens = onboarding.some((step) => step.step === "user" && !step.done) ? await onboard() : await login();
const AUTH = { Authorization: `Bearer ${tokens.access_token}`, "Content-Type": "application/json" };
const only = process.env.ONLY ? new Set(process.env.ONLY.split(",")) : null;
const wanted = (group) => (only ? only.has(group) : group !== "assist");

// Wait until HA has finished starting: no start-up toasts over the shots.
for (let tries = 0; tries < 300; tries += 1) {
  const config = await json(`${HA}/api/config`, { headers: AUTH });
  if (config.state === "RUNNING") break;
  await new Promise((resolve) => setTimeout(resolve, 1000));
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
try {
  const context = await browser.newContext({ viewport: VIEWPORT });
  await context.addInitScript((stored) => {
    window.localStorage.setItem("hassTokens", JSON.stringify(stored));
  }, {
    ...tokens,
    hassUrl: HA,
    clientId: CLIENT_ID,
    expires: Date.now() + tokens.expires_in * 1000,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(60000);
  try {
    if (wanted("config")) await configFlowShots(page);
    // Before the options are saved: saving reloads the entry, and its
    // entities' moment of Unavailable would show in the device's activity.
    if (wanted("device")) await deviceShots(page);
    if (wanted("options")) await optionsShots(page);
    if (wanted("mapping")) await mappingShots(page);
    if (wanted("repair")) await repairShots(page);
    // Last: the entry goes off and on, which the device page's activity shows.
    if (wanted("damaged")) await damagedFileShots(page);
    if (wanted("assist")) await assistShots(page);
  } catch (err) {
    await page.screenshot({ path: path.join(process.env.NODE_PATH, "..", "failed.png") });
    throw err;
  }
} finally {
  await browser.close();
}

// Open the config flow the way "Add integration" opens it: its first step
// is the choice of model server.
async function startConfigFlow(page) {
  await page.goto(`${HA}/config/integrations/dashboard/add?domain=${DOMAIN}`);
  await page.getByRole("button", { name: "OK" }).click();
  await page.getByText("Choose the model server").waitFor();
}

// Only the flow's dialog is saved: the integration cards behind it have no
// icons without a network (their brand images come from the internet).
async function configFlowShots(page) {
  await startConfigFlow(page);
  await shot(page, "config-flow-backend.png", { dialogOnly: true });
  // The OpenAI-compatible path: its address and key, then the warning for a
  // server outside the home (a name that is not on the home network). The
  // flow is left there; the entry is made through the Ollama path.
  await page.getByText(/OpenAI-compatible server \(/).click();
  await submit(page);
  await page.getByText("Connect to an OpenAI-compatible server").waitFor();
  await shot(page, "config-flow-openai.png", { dialogOnly: true });
  await page.getByRole("textbox", { name: /Server URL/ }).fill("https://llm.example.com/v1");
  await submit(page);
  await page.getByText("This server is outside your home network").waitFor();
  await shot(page, "config-flow-public-server.png", { dialogOnly: true });
  await page.keyboard.press("Escape");
  // The Ollama path: the server's address, then the models.
  await startConfigFlow(page);
  await submit(page);
  await page.getByText("Connect to Ollama").waitFor();
  await shot(page, "config-flow-server.png", { dialogOnly: true });
  await submit(page);
  await page.getByText("Choose the models").waitFor();
  await shot(page, "config-flow-model.png", { dialogOnly: true });
  // A model without tool support is refused with a plain-text error.
  await choose(page, "Chat model", /gemma:2b/);
  await submit(page);
  await page.getByText(/can't call tools/).waitFor();
  await shot(page, "config-flow-model-error.png", { dialogOnly: true });
  await choose(page, "Chat model", /qwen3:4b/);
  await submit(page);
  // HA offers to name the new device and put it in an area.
  await page.getByRole("button", { name: /skip and finish|finish/i }).first().waitFor();
  await shot(page, "config-flow-done.png", { dialogOnly: true });
  await page.getByRole("button", { name: /skip and finish|finish/i }).first().click();
}

async function openOptions(page) {
  await page.goto(`${HA}/config/integrations/integration/${DOMAIN}`);
  await page.getByRole("button", { name: /configure/i }).first().click();
  await page.getByText("Assistant options").waitFor();
}

async function optionsShots(page) {
  // A tall window, so the whole form fits; only the dialog is saved. First
  // the general options with the permission sections folded, then those
  // sections opened.
  await page.setViewportSize({ width: VIEWPORT.width, height: 3400 });
  await openOptions(page);
  await shot(page, "options-general.png", { dialogOnly: true });
  await page.keyboard.press("Escape");
  await openOptions(page);
  for (const name of PERMISSION_SECTIONS) {
    await page.getByText(name, { exact: true }).click();
  }
  // Once the sections have opened, start the picture at the first of them.
  await page.waitForTimeout(1500);
  await page.getByText(PERMISSION_SECTIONS[0], { exact: true }).evaluate((heading) =>
    heading.scrollIntoView({ block: "start" }),
  );
  await shot(page, "options-permissions.png", { dialogOnly: true });
  await page.keyboard.press("Escape");
  await page.setViewportSize(VIEWPORT);
}

// A Home Assistant user for Anna, to link her Telegram id to.
async function createHaUser(page, name) {
  return page.evaluate(async (userName) => {
    const { hass } = document.querySelector("home-assistant");
    const { user } = await hass.callWS({
      type: "config/auth/create",
      name: userName,
      group_ids: ["system-users"],
      local_only: true,
    });
    return user.id;
  }, name);
}

async function mappingShots(page) {
  await openOptions(page);
  await page.getByText("Allowed Telegram user id").first().waitFor();
  await createHaUser(page, "Anna");
  for (const telegramId of [ANNA, BEN, STRANGER]) {
    await page.getByRole("button", { name: /Add Allowed Telegram user id/ }).click();
    await page.getByRole("textbox", { name: "Allowed Telegram user id" }).last().fill(telegramId);
  }
  await submit(page);
  await page.getByText("Link Telegram users to Home Assistant users").waitFor();
  await choose(page, `Anna (${ANNA})`, "Anna");
  await shot(page, "options-user-mapping.png");
  await submit(page);
  await page.getByText(/success/i).first().waitFor();
  await page.keyboard.press("Escape");
}

// Weaken the policy through the options flow's API, as a user might in the
// form: lock.unlock no longer asks. Its repair issue then appears.
async function weakenPolicy() {
  const [entry] = await json(`${HA}/api/config/config_entries/entry?domain=${DOMAIN}`, { headers: AUTH });
  let flow = await json(`${HA}/api/config/config_entries/options/flow`, {
    method: "POST",
    headers: AUTH,
    body: JSON.stringify({ handler: entry.entry_id }),
  });
  const field = (name) => flow.data_schema.find((item) => item.name === name);
  const confirm = field("confirm").schema[0].description?.suggested_value
    ?? field("confirm").schema[0].selector.select.options;
  const keep = {};
  for (const item of flow.data_schema) {
    // An empty value is left out, as the form leaves it out (an empty
    // stt_engine is no entity id).
    const value = item.description?.suggested_value;
    if (item.type !== "expandable" && value !== undefined && value !== "") {
      keep[item.name] = value;
    }
  }
  flow = await json(`${HA}/api/config/config_entries/options/flow/${flow.flow_id}`, {
    method: "POST",
    headers: AUTH,
    body: JSON.stringify({
      ...keep,
      confirm: { confirm_services: confirm.filter((entry) => entry !== "lock.unlock") },
    }),
  });
  if (flow.step_id === "user_mapping") {
    const mapping = {};
    for (const item of flow.data_schema) {
      if (item.description?.suggested_value) mapping[item.name] = item.description.suggested_value;
    }
    flow = await json(`${HA}/api/config/config_entries/options/flow/${flow.flow_id}`, {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify(mapping),
    });
  }
  if (flow.type !== "create_entry") throw new Error(`options not saved: ${JSON.stringify(flow)}`);
}

async function repairShots(page) {
  await weakenPolicy();
  await page.goto(`${HA}/config/repairs`);
  await page.getByText("less safe than the defaults").first().click();
  await page.getByText(/weaken the safety defaults/).waitFor();
  await shot(page, "repair-unsafe-permissions.png");
  await page.keyboard.press("Escape");
}

// The entry off, so the assistant closes its database; the file damaged;
// the entry on again: the assistant moves the file aside, starts a new one
// and raises the repair whose fix flow asks what becomes of the copy.
async function damagedFileShots(page) {
  const [entry] = await json(`${HA}/api/config/config_entries/entry?domain=${DOMAIN}`, { headers: AUTH });
  const setDisabled = (disabledBy) =>
    page.evaluate(
      async ([entryId, by]) => {
        const { hass } = document.querySelector("home-assistant");
        await hass.callWS({ type: "config_entries/disable", entry_id: entryId, disabled_by: by });
      },
      [entry.entry_id, disabledBy],
    );
  await setDisabled("user");
  const database = path.join(CONFIG, DOMAIN, "assistant.db");
  for (const suffix of ["-wal", "-shm"]) rmSync(`${database}${suffix}`, { force: true });
  writeFileSync(database, "This is not an SQLite database.\n".repeat(200));
  await setDisabled(null);
  await page.goto(`${HA}/config/repairs`);
  await page.getByText("database was damaged").first().click();
  await page.getByText("Delete the damaged copy").waitFor();
  await shot(page, "repair-database-recreated.png");
  await page.getByText("Keep the damaged copy").click();
  await page.keyboard.press("Escape");
}

// A few turns through the fake model, so the sensors (last answer time,
// tokens, context use) show figures rather than Unknown.
async function talk() {
  const states = await json(`${HA}/api/states`, { headers: AUTH });
  const agent = states.find(
    (state) => state.entity_id.startsWith("conversation.") && state.entity_id !== "conversation.home_assistant",
  );
  // Questions, not commands: known commands are answered without the model
  // (option fast_path), which leaves the model's sensors at nothing.
  for (const text of ["Which lights are on?", "What can you do for us?"]) {
    const { response } = await json(`${HA}/api/conversation/process`, {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ text, language: "en", agent_id: agent.entity_id }),
    });
    console.log(`${text} -> ${response.speech?.plain?.speech}`);
  }
  // The AI task entity answers a task once, so it shows when it last did.
  const task = states.find((state) => state.entity_id.startsWith("ai_task."));
  if (task) {
    await json(`${HA}/api/services/ai_task/generate_data?return_response`, {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ task_name: "greeting", instructions: "Greet the house.", entity_id: task.entity_id }),
    }).catch((err) => console.log(`ai_task: ${err.message}`));
  }
}

async function deviceShots(page) {
  await talk();
  // The entry's service device with its sensors.
  await page.goto(`${HA}/config/integrations/integration/${DOMAIN}`);
  await page.getByText(/1 service/i).first().click();
  await page.getByText(/model status/i).first().waitFor();
  await shot(page, "device.png");
  // An entity's settings: its id comes from the device's name and the
  // entity's name, not from the model or the server.
  await page.goto(`${HA}/config/entities?domain=${DOMAIN}`);
  await page.getByText("Context tokens", { exact: true }).click();
  await page.getByRole("button", { name: "Settings", exact: true }).click();
  await page.getByText("Entity ID").filter({ visible: true }).first().waitFor();
  await shot(page, "entity-settings.png");
}

async function assistShots(page) {
  // The Assist dialog over the demo house's overview, asked about the front
  // door; the answer comes from the integration's agent (the preferred
  // pipeline's, as scripts/develop sets it up) and the tiny model.
  await page.goto(`${HA}/lovelace/0`);
  await page.getByRole("button", { name: /^Assist/ }).first().click();
  const input = page.getByRole("textbox").last();
  await input.fill("is the front door locked?");
  await input.press("Enter");
  // The greeting, then the reply: it streams in once the model has read the
  // prompt; wait until its text has stopped growing.
  const reply = page.locator(".message.hass").nth(1);
  await reply.waitFor();
  let last = "";
  for (let tries = 0; tries < 300; tries += 1) {
    await page.waitForTimeout(2000);
    // The text sits in the message's shadow roots, which innerText skips.
    const text = await reply.evaluate((element) => {
      const parts = [];
      const walk = (node) => {
        if (node.nodeType === Node.TEXT_NODE) parts.push(node.textContent);
        if (node.shadowRoot) walk(node.shadowRoot);
        for (const child of node.childNodes) walk(child);
      };
      walk(element);
      return parts.join("").trim();
    });
    // While the reply streams, Home Assistant ends it with "…".
    if (text && !text.endsWith("…") && !text.endsWith("...") && text === last) break;
    last = text;
  }
  await shot(page, "assist-demo-house.png");
}
