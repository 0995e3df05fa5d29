/*
 * An LLVM 14 pass plugin that lets the emulated device count what the
 * hardware counters of a profiler count besides memory: floating-point
 * work by kind and divergent branches (emu/counters.cpp keeps the counts).
 * clang loads it for the kernels' objects (-fpass-plugin, see the
 * Makefile); the calls it inserts are declared in emu/count_hooks.h.
 *
 *   - Per basic block, the static counts of floating-point operations by
 *     kind (emu/count_hooks.h), each vector operation once per element,
 *     and of the instructions a GPU would issue for it (roughly: issued());
 *     one call with a constant table of them before the block's end.
 *   - Before a load whose address comes from another load's value, a call
 *     that marks it dependent (the latency chain's rounds of loads).
 *   - Before every conditional branch and switch, a call with the
 *     successor the lane takes; the emulator pairs the lanes of a warp
 *     (counters.cpp) and counts the branch divergent when they disagree.
 *
 * When: at the end of the optimizer (registerOptimizerLastEPCallback), on
 * the IR that becomes machine code, after inlining, unrolling,
 * vectorization and the if-conversion of small branches into selects.
 * Calls inserted earlier would change that code (a call in a loop keeps it
 * from being vectorized) and count branches the optimizer removes.
 * SanitizerCoverage, which inserts the load and store hooks, runs at the
 * same point: clang registers a plugin's callbacks before its sanitizers',
 * so both see the same final IR.
 *
 * Not counted: code from the emulator's own headers inlined into a kernel
 * (emu/device.h: the atomics' compare-and-swap loops, the shuffles' copies,
 * min and max, the math wrappers such as rsqrtf), told by each
 * instruction's debug location (the Makefile gives the kernels at least
 * line tables): a file in a directory named emu.  On a GPU each of those
 * is one instruction (an atomic, SHFL, FMNMX, a MUFU special-function op)
 * that neither branches nor counts in Nsight's FLOPs.  Comparisons,
 * negations, fabs, min/max and conversions are not counted either: they
 * are not in Nsight's FLOPs.
 */
#include "count_hooks.h"

#include <stdint.h>

#include <algorithm>
#include <array>
#include <map>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace {

typedef std::array<uint32_t, CUDA_EMU_FP_FIELDS> fp_counts;

/* The C library's math functions counted as one fp32 "other" (the float
 * name, ending in f) or one fp64 operation: on a GPU each is a few
 * instructions (a special-function op and some FMAs), here one call. */
const char *const MATH_FUNCTIONS[] = {
    "exp",  "exp2", "expm1", "exp10", "log",  "log2",  "log10", "log1p", "pow",
    "sqrt", "cbrt", "sin",   "cos",   "tan",  "asin",  "acos",  "atan",  "atan2",
    "sinh", "cosh", "tanh",  "asinh", "acosh", "atanh", "erf",  "erfc",  "hypot",
    "fmod",
};

/* Adds `lanes` operations of `type` (a scalar or vector) of kind
 * `fp32_field` (when fp32), each worth `flops` floating-point operations.
 * Host types with no GPU counterpart (long double) count nothing. */
void add_op(fp_counts &c, Type *type, int fp32_field, unsigned flops)
{
    unsigned lanes = 1;
    if (auto *vector = dyn_cast<FixedVectorType>(type))
        lanes = vector->getNumElements();
    Type *scalar = type->getScalarType();
    if (scalar->isFloatTy())
        c[fp32_field] += lanes;
    else if (scalar->isDoubleTy())
        c[CUDA_EMU_FP64_OPS] += lanes;
    else if (scalar->isHalfTy() || scalar->isBFloatTy())
        c[CUDA_EMU_FP16_OPS] += lanes;
    else
        return;
    c[CUDA_EMU_FLOPS] += lanes * flops;
}

/* The floating-point work of one instruction, added to `c`. */
void count_instruction(const Instruction &inst, fp_counts &c, const StringSet<> &math)
{
    switch (inst.getOpcode()) {
    case Instruction::FAdd:
    case Instruction::FSub:
        add_op(c, inst.getType(), CUDA_EMU_FP32_ADDS, 1);
        return;
    case Instruction::FMul:
        add_op(c, inst.getType(), CUDA_EMU_FP32_MULS, 1);
        return;
    case Instruction::FDiv:
    case Instruction::FRem:
        add_op(c, inst.getType(), CUDA_EMU_FP32_OTHER, 1);
        return;
    default:
        break;
    }
    if (const auto *intrinsic = dyn_cast<IntrinsicInst>(&inst)) {
        switch (intrinsic->getIntrinsicID()) {
        case Intrinsic::fma:
        case Intrinsic::fmuladd:
            add_op(c, inst.getType(), CUDA_EMU_FP32_FMAS, 2);
            return;
        case Intrinsic::sqrt:
        case Intrinsic::exp:
        case Intrinsic::exp2:
        case Intrinsic::log:
        case Intrinsic::log2:
        case Intrinsic::log10:
        case Intrinsic::pow:
        case Intrinsic::powi:
        case Intrinsic::sin:
        case Intrinsic::cos:
            add_op(c, inst.getType(), CUDA_EMU_FP32_OTHER, 1);
            return;
        default:
            return;
        }
    }
    if (const auto *call = dyn_cast<CallInst>(&inst)) {
        const Function *callee = call->getCalledFunction();
        if (callee && callee->isDeclaration() && math.count(callee->getName()))
            add_op(c, inst.getType(), CUDA_EMU_FP32_OTHER, 1);
    }
}

/* The elements of `type`: 1 for a scalar.  The host compiler vectorizes
 * some of a thread's loops; a GPU thread runs them element by element. */
unsigned elements_of(Type *type)
{
    if (auto *vector = dyn_cast<FixedVectorType>(type))
        return vector->getNumElements();
    return 1;
}

/* The load or store instructions a GPU issues for an access of `type`
 * aligned to `align`: one per 16 bytes at most, none wider than the
 * alignment (a float4 from a 16-byte aligned address is one LDS.128 or
 * LDG.E.128; a host vector of four floats aligned to 4 is four loads). */
unsigned accesses_of(Type *type, Align align, const Instruction &inst)
{
    if (!isa<FixedVectorType>(type))
        return 1;
    uint64_t bytes = inst.getModule()->getDataLayout().getTypeStoreSize(type).getFixedSize();
    uint64_t width = std::min<uint64_t>(align.value(), 16);
    return (unsigned)std::max<uint64_t>(1, (bytes + width - 1) / width);
}

/* Whether `inst`, a remainder, has the quotient of the same operands in
 * its block: nvcc (and LLVM's DivRemPairs for targets without a combined
 * instruction) computes it from the quotient. */
bool has_quotient(const Instruction &inst)
{
    unsigned quotient = inst.getOpcode() == Instruction::URem ? Instruction::UDiv
                        : inst.getOpcode() == Instruction::SRem ? Instruction::SDiv
                                                                : 0;
    if (!quotient)
        return false;
    for (const Instruction &other : *inst.getParent())
        if (other.getOpcode() == quotient && other.getOperand(0) == inst.getOperand(0) &&
            other.getOperand(1) == inst.getOperand(1))
            return true;
    return false;
}

/* Roughly the instructions a GPU issues for `inst`, per thread: one per
 * element of an operation; none for what SASS does not execute (phis,
 * debug and lifetime markers, no-op and integer-width casts, addresses,
 * which fold into the load or store, unconditional jumps, the host's
 * vector shuffles, an empty asm statement); a load or store as one
 * instruction per 16 bytes its alignment allows (accesses_of); a
 * math library call as the few instructions of its GPU routine (float: a
 * special-function op and some FMAs, about 4; double: a software routine,
 * about 20); an integer division or remainder as the GPU's routine for
 * it (a remainder beside its quotient: a multiply and a subtract).  Only the latency term of the roofline model reads this
 * (docs/roofline.md): a count within a factor of about 1.5 of SASS's. */
unsigned issued(const Instruction &inst, const StringSet<> &math)
{
    if (isa<PHINode>(inst) || isa<DbgInfoIntrinsic>(inst) || isa<AllocaInst>(inst) ||
        isa<UnreachableInst>(inst) || isa<FreezeInst>(inst))
        return 0;
    /* the host's vector lanes moved about (a GPU thread's values are
     * scalar registers already) and aggregates taken apart */
    if (isa<ShuffleVectorInst>(inst) || isa<InsertElementInst>(inst) ||
        isa<ExtractElementInst>(inst) || isa<InsertValueInst>(inst) ||
        isa<ExtractValueInst>(inst))
        return 0;
    switch (inst.getOpcode()) {
    case Instruction::BitCast:
    case Instruction::AddrSpaceCast:
    case Instruction::PtrToInt:
    case Instruction::IntToPtr:
    case Instruction::ZExt:
    case Instruction::SExt:
    case Instruction::Trunc:
        return 0;
    default:
        break;
    }
    switch (inst.getOpcode()) {
    case Instruction::UDiv:
    case Instruction::SDiv:
    case Instruction::URem:
    case Instruction::SRem:
        /* no integer divider on a GPU: a constant divisor is a multiply-high
         * and shifts; any other a routine of some 20 instructions for 32 bits
         * (about 70, a call, for 64) */
        if (isa<Constant>(inst.getOperand(1)))
            return 3 * elements_of(inst.getType());
        if (has_quotient(inst)) /* x % d beside x / d: a multiply and a subtract */
            return 2 * elements_of(inst.getType());
        return (inst.getType()->getScalarSizeInBits() > 32 ? 70u : 20u) *
               elements_of(inst.getType());
    default:
        break;
    }
    /* an address: SASS folds it into the load or store (a base register
     * plus an immediate), and the index arithmetic that varies is counted
     * where it is computed (add, mul, shl) */
    if (isa<GetElementPtrInst>(inst))
        return 0;
    /* a jump to the next block is no instruction in straight-line SASS */
    if (const auto *branch = dyn_cast<BranchInst>(&inst))
        return branch->isConditional() ? 1 : 0;
    if (const auto *intrinsic = dyn_cast<IntrinsicInst>(&inst)) {
        switch (intrinsic->getIntrinsicID()) {
        case Intrinsic::lifetime_start:
        case Intrinsic::lifetime_end:
        case Intrinsic::assume:
        case Intrinsic::experimental_noalias_scope_decl:
            return 0;
        default:
            return elements_of(inst.getType()->isVoidTy() ? Type::getInt32Ty(inst.getContext())
                                                          : inst.getType());
        }
    }
    if (const auto *call = dyn_cast<CallInst>(&inst)) {
        /* an empty asm statement (ct_load4's: it keeps the host compiler
         * from splitting a 128-bit access) emits nothing */
        if (const auto *assembly = dyn_cast<InlineAsm>(call->getCalledOperand()))
            return assembly->getAsmString().empty() ? 0 : 1;
        const Function *callee = call->getCalledFunction();
        if (callee && callee->isDeclaration() && math.count(callee->getName()))
            return elements_of(inst.getType()) *
                   (inst.getType()->getScalarType()->isDoubleTy() ? 20u : 4u);
        return 1;
    }
    if (const auto *store = dyn_cast<StoreInst>(&inst))
        return accesses_of(store->getValueOperand()->getType(), store->getAlign(), inst);
    if (const auto *load = dyn_cast<LoadInst>(&inst))
        return accesses_of(load->getType(), load->getAlign(), inst);
    return inst.getType()->isVoidTy() ? 1 : elements_of(inst.getType());
}

struct count_pass : PassInfoMixin<count_pass> {
    DenseMap<const DIFile *, bool> emulator_files;

    /* Whether `inst` is the emulator's own code: its innermost source
     * location is in a directory named emu (see the top). */
    bool from_emulator(const Instruction &inst)
    {
        const DILocation *location = inst.getDebugLoc().get();
        if (!location)
            return false;
        const DIFile *file = location->getScope()->getFile();
        if (!file)
            return false;
        auto known = emulator_files.find(file);
        if (known != emulator_files.end())
            return known->second;
        SmallString<256> path(file->getFilename());
        if (!sys::path::is_absolute(path)) {
            path = file->getDirectory();
            sys::path::append(path, file->getFilename());
        }
        sys::path::remove_dots(path, true);
        bool emulator = sys::path::filename(sys::path::parent_path(path)) == "emu";
        emulator_files[file] = emulator;
        return emulator;
    }

    /* Whether `load` (of the kernel's code) reads through a pointer the
     * kernel was given, or one read from such memory: device memory, not
     * the stack, a by-value parameter or a global variable (the emulator
     * reads threadIdx through one). */
    bool reads_device_memory(const LoadInst *load, int depth)
    {
        if (depth > 8 || from_emulator(*load))
            return false;
        const Value *object = getUnderlyingObject(load->getPointerOperand());
        if (const auto *argument = dyn_cast<Argument>(object)) {
            /* a reference to a struct (a helper's `const conv_geometry &`,
             * a member function's `this`) that the host compiler left out
             * of line: on a GPU the kernel's by-value parameters (nvcc
             * inlines the helper), as a by-value parameter here.  Counted
             * as device memory, every address made from its fields waited
             * a round trip: the convolution patches' copies a round per
             * load (until 2026-12-02) */
            const auto *type = dyn_cast<PointerType>(argument->getType());
            if (type && !type->isOpaque() && type->getPointerElementType()->isStructTy())
                return false;
            return !argument->hasByValAttr();
        }
        if (const auto *pointer_load = dyn_cast<LoadInst>(object))
            return reads_device_memory(pointer_load, depth + 1);
        return false;
    }

    /* Whether `value` was computed (through arithmetic, addresses, selects
     * and phis) from what a load read from device memory: a load at that
     * address waits for the first one's round trip. */
    bool from_loaded_value(const Value *value, SmallPtrSetImpl<const Value *> &seen, int depth)
    {
        if (depth > 32 || !seen.insert(value).second)
            return false;
        if (const auto *load = dyn_cast<LoadInst>(value))
            return reads_device_memory(load, 0);
        const auto *inst = dyn_cast<Instruction>(value);
        if (!inst || isa<CallBase>(inst))
            return false;
        for (const Use &operand : inst->operands())
            if (from_loaded_value(operand.get(), seen, depth + 1))
                return true;
        return false;
    }

    /* The successor `terminator` sends the lane to, as an i32 before it;
     * null for one that is not a conditional branch or switch, or whose
     * way is known at compile time.  Cases that lead to one block are one
     * successor: lanes that reach it by different values do not diverge. */
    static Value *taken_successor(Instruction *terminator, IRBuilder<> &builder)
    {
        if (auto *branch = dyn_cast<BranchInst>(terminator)) {
            if (!branch->isConditional() || isa<Constant>(branch->getCondition()) ||
                branch->getSuccessor(0) == branch->getSuccessor(1))
                return nullptr;
            return builder.CreateSelect(branch->getCondition(), builder.getInt32(0),
                                        builder.getInt32(1));
        }
        auto *choice = dyn_cast<SwitchInst>(terminator);
        if (!choice || isa<Constant>(choice->getCondition()) || choice->getNumCases() == 0)
            return nullptr;
        DenseMap<BasicBlock *, uint32_t> first_index; /* block -> its lowest successor index */
        for (unsigned i = 0; i < choice->getNumSuccessors(); i++)
            first_index.insert({choice->getSuccessor(i), i});
        Value *taken = builder.getInt32(0); /* the default */
        for (auto &c : choice->cases()) {
            uint32_t index = first_index[c.getCaseSuccessor()];
            if (index != 0)
                taken = builder.CreateSelect(
                    builder.CreateICmpEQ(choice->getCondition(), c.getCaseValue()),
                    builder.getInt32(index), taken);
        }
        return taken;
    }

    PreservedAnalyses run(Module &module, ModuleAnalysisManager &)
    {
        LLVMContext &context = module.getContext();
        StringSet<> math;
        for (const char *name : MATH_FUNCTIONS) {
            math.insert(name);
            math.insert(std::string(name) + "f");
        }
        Type *void_type = Type::getVoidTy(context);
        FunctionCallee count_fp = module.getOrInsertFunction(
            CUDA_EMU_COUNT_FP_HOOK, void_type, Type::getInt32PtrTy(context));
        FunctionCallee branch_hook = module.getOrInsertFunction(
            CUDA_EMU_BRANCH_HOOK, void_type, Type::getInt32Ty(context));
        FunctionCallee dependent_hook =
            module.getOrInsertFunction(CUDA_EMU_DEPENDENT_LOAD_HOOK, void_type);
        std::map<fp_counts, Constant *> tables; /* one per distinct block count */
        bool changed = false;
        for (Function &function : module) {
            if (function.isDeclaration())
                continue;
            for (BasicBlock &block : function) {
                for (Instruction &inst : block) {
                    auto *load = dyn_cast<LoadInst>(&inst);
                    SmallPtrSet<const Value *, 32> seen;
                    if (load && !from_emulator(inst) &&
                        from_loaded_value(load->getPointerOperand(), seen, 0)) {
                        IRBuilder<>(load).CreateCall(dependent_hook)->setDebugLoc(
                            load->getDebugLoc());
                        changed = true;
                    }
                }
                fp_counts counts{};
                for (const Instruction &inst : block)
                    if (!from_emulator(inst)) {
                        count_instruction(inst, counts, math);
                        counts[CUDA_EMU_INSTRUCTIONS] += issued(inst, math);
                    }
                Instruction *terminator = block.getTerminator();
                /* nothing may come between a musttail call and its return */
                Instruction *end = block.getTerminatingMustTailCall();
                IRBuilder<> builder(end ? end : terminator);
                if (counts[CUDA_EMU_FLOPS] || counts[CUDA_EMU_INSTRUCTIONS]) {
                    Constant *&table = tables[counts];
                    if (!table)
                        table = fp_table(module, counts);
                    builder.CreateCall(count_fp, {table})->setDebugLoc(terminator->getDebugLoc());
                    changed = true;
                }
                if (from_emulator(*terminator))
                    continue;
                if (Value *taken = taken_successor(terminator, builder)) {
                    builder.CreateCall(branch_hook, {taken})
                        ->setDebugLoc(terminator->getDebugLoc());
                    changed = true;
                }
            }
        }
        return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
    }

    /* A pointer to a private constant copy of `counts`. */
    static Constant *fp_table(Module &module, const fp_counts &counts)
    {
        Constant *data = ConstantDataArray::get(module.getContext(), ArrayRef<uint32_t>(counts));
        auto *table = new GlobalVariable(module, data->getType(), true,
                                         GlobalValue::PrivateLinkage, data, "cuda_emu_fp");
        table->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
        Constant *zero = ConstantInt::get(Type::getInt32Ty(module.getContext()), 0);
        return ConstantExpr::getInBoundsGetElementPtr(data->getType(), table,
                                                      ArrayRef<Constant *>{zero, zero});
    }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
    return {LLVM_PLUGIN_API_VERSION, "cuda-emu-count", LLVM_VERSION_STRING, [](PassBuilder &pb) {
                pb.registerOptimizerLastEPCallback(
                    [](ModulePassManager &mpm, OptimizationLevel) { mpm.addPass(count_pass()); });
            }};
}
