import type { Ajv } from 'ajv';

/**
 * The protocol (like JavaScript, and the platforms it was written for) counts string lengths in
 * UTF-16 code units; Ajv 8 counts code points. Redefine minLength/maxLength on an Ajv instance to
 * count code units.
 */
export function withUtf16Lengths<A extends Ajv>(ajv: A): A {
  ajv.removeKeyword('maxLength');
  ajv.removeKeyword('minLength');
  ajv.addKeyword({ keyword: 'maxLength', type: 'string', schemaType: 'number', errors: false, validate: (max: number, data: string) => data.length <= max });
  ajv.addKeyword({ keyword: 'minLength', type: 'string', schemaType: 'number', errors: false, validate: (min: number, data: string) => data.length >= min });
  return ajv;
}
