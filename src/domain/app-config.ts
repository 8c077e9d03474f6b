// An app config's document (CONTRACT 4.2): what POST /v1/apps/{app}/configs takes and what the
// store keeps, immutable and versioned.

export interface ComponentSpec {
  name: string;
  type?: string;
  labels?: Record<string, string>;
  values?: Record<string, unknown>;
}

export interface AppConfigBody {
  sandbox?: Record<string, unknown>;
  components: ComponentSpec[];
  actions?: Array<{ name: string; labels?: Record<string, string>; inputs?: Record<string, { required?: boolean }> }>;
  inputs?: Record<string, unknown>;
}
