// Screenshots of the integration's config flow and options flow, taken by
// headless chromium through playwright-core. Called by scripts/screenshots,
// which starts Home Assistant and a fake Ollama first.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH, "x.js"));
const { chromium } = require("playwright-core");

const HA = "http://127.0.0.1:8123";
const CLIENT_ID = `${HA}/`;
const OUT = process.env.OUT;
const USER = { name: "Demo", username: "demo", password: "demo-password-1234" };

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
  return tokens;
}

async function shot(page, name) {
  // Let the dialog's animations settle.
  await page.waitForTimeout(1500);
  await page.screenshot({ path: path.join(OUT, name) });
  console.log(`saved docs/${name}`);
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

const steps = await json(`${HA}/api/onboarding`);
const tokens = steps.some((step) => step.step === "user" && !step.done) ? await onboard() : await login();
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
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
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
    await takeShots(page);
  } catch (err) {
    await page.screenshot({ path: path.join(process.env.NODE_PATH, "..", "failed.png") });
    throw err;
  }
} finally {
  await browser.close();
}

async function takeShots(page) {
  if (!process.env.ONLY_OPTIONS) await configFlowShots(page);
  await optionsShots(page);
}

async function configFlowShots(page) {
  // The config flow, opened the way "Add integration" opens it.
  await page.goto(`${HA}/config/integrations/dashboard/add?domain=ha_personal_assistant`);
  await page.getByRole("button", { name: "OK" }).click();
  await page.getByText("Ollama", { exact: false }).first().waitFor();
  await shot(page, "config-flow-server.png");
  await page.getByRole("button", { name: /submit|next/i }).click();
  await page.getByText(/model/i).first().waitFor();
  await shot(page, "config-flow-model.png");
  await page.getByRole("button", { name: /submit|next/i }).click();
  // HA offers to name the new device and put it in an area.
  await page.getByRole("button", { name: /skip and finish|finish/i }).first().waitFor();
  await shot(page, "config-flow-done.png");
  await page.getByRole("button", { name: /skip and finish|finish/i }).first().click();

}

async function optionsShots(page) {
  // The options flow, from the integration's page.
  await page.goto(`${HA}/config/integrations/integration/ha_personal_assistant`);
  await page.getByRole("button", { name: /configure/i }).first().click();
  await page.getByText(/confirmation/i).first().waitFor();
  await shot(page, "options-flow.png");
  await page.keyboard.press("Escape");

  // The entry's service device with its sensors.
  await page.goto(`${HA}/config/integrations/integration/ha_personal_assistant`);
  await page.getByText(/1 service/i).first().click();
  await page.getByText(/model status/i).first().waitFor();
  await shot(page, "device.png");
}
