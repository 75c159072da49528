import { chaosSmoke } from './chaos/smoke.js';

// The chaos campaign's short run of the discord phases (test/chaos/smoke.ts has the groups).
chaosSmoke('discord');
